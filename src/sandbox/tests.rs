use super::*;

const ALL: Extras = Extras {
    ioctl_dev: true,
    scopes: true,
};

#[test]
fn decisions_per_mode_and_kernel() {
    let ns = || Ok(());
    let no_ns = || Err("unshare(CLONE_NEWNET): EPERM".to_string());
    assert_eq!(
        decide(Mode::Auto, true, ALL, ns),
        Ok(Confinement::Landlock {
            netns: Ok(()),
            extras: ALL
        })
    );
    assert_eq!(
        decide(Mode::Landlock, true, Extras::default(), no_ns),
        Ok(Confinement::Landlock {
            netns: Err("unshare(CLONE_NEWNET): EPERM".into()),
            extras: Extras::default()
        })
    );
    assert!(matches!(
        decide(Mode::Auto, false, ALL, ns),
        Ok(Confinement::Unconfined { warn: true, .. })
    ));
    for available in [true, false] {
        let asked = std::cell::Cell::new(false);
        assert!(matches!(
            decide(Mode::Off, available, ALL, || {
                asked.set(true);
                Ok(())
            }),
            Ok(Confinement::Unconfined { warn: false, .. })
        ));
        assert!(!asked.get(), "no namespace probe when unconfined");
    }
    let refused = decide(Mode::Landlock, false, ALL, ns).unwrap_err();
    assert!(refused.contains("SANDBOX=landlock"), "{refused}");
}

/// Status never claims more than the run got: each part named, and what stays open.
#[test]
fn descriptions_name_the_parts_the_agent_gets() {
    let with = Confinement::Landlock {
        netns: Ok(()),
        extras: ALL,
    }
    .describe();
    assert!(
        with.starts_with("landlock-fs+landlock-net+landlock-ioctl+landlock-scope+netns: "),
        "{with}"
    );
    assert!(
        with.contains("a session of its own with no terminal"),
        "{with}"
    );
    assert!(with.contains("sends no ioctl to another device"), "{with}");
    assert!(
        with.contains("signals and reaches abstract Unix sockets of its own processes only"),
        "{with}"
    );
    assert!(
        with.ends_with(&format!(
            "still open: {STILL_OPEN_GRANTED_SOCKETS}, CPU and memory"
        )),
        "{with}"
    );
    let without = Confinement::Landlock {
        netns: Err("no privilege".into()),
        extras: Extras::default(),
    }
    .describe();
    assert!(
        without.starts_with("landlock-fs+landlock-net: "),
        "{without}"
    );
    assert!(!without.contains("sends no ioctl"), "{without}");
    assert!(
        without.contains("still open: UDP (DNS included), other hosts on the proxy's own port, abstract Unix sockets, signals to the user's other processes, hank's included (no Landlock ABI 6), ioctls on the devices it may open (no Landlock ABI 5), Unix sockets on paths"),
        "{without}"
    );
    assert!(
        without.ends_with("(no network namespace: no privilege)"),
        "{without}"
    );
    // ABI 5 without 6: the ioctl part named, the scopes said open.
    let five = Confinement::Landlock {
        netns: Ok(()),
        extras: Extras {
            ioctl_dev: true,
            scopes: false,
        },
    };
    assert_eq!(five.name(), "landlock-fs+landlock-net+landlock-ioctl+netns");
    assert!(
        five.describe()
            .contains("still open: signals to the user's other processes")
    );
    assert_eq!(
        Confinement::Unconfined {
            why: "SANDBOX=off".into(),
            warn: false
        }
        .name(),
        "off"
    );
}

#[test]
fn host_entries_become_host_and_port() {
    let cases = [
        ("https://api.anthropic.com", Some("api.anthropic.com:443")),
        ("http://127.0.0.1:8080/v1", Some("127.0.0.1:8080")),
        ("http://user:pw@Proxy.Example:81/", Some("proxy.example:81")),
        ("registry.npmjs.org", Some("registry.npmjs.org:443")),
        ("crates.io:8443", Some("crates.io:8443")),
        ("http://[::1]:9000", Some("[::1]:9000")),
        ("https://", None),
        ("bad host", None),
        ("h:0", None),
        ("h:notaport", None),
    ];
    for (entry, want) in cases {
        assert_eq!(host_port(entry).as_deref(), want, "{entry}");
    }
    assert_eq!(
        parse_hosts("a.io, b.io:80  https://c.io"),
        Some(vec!["a.io:443".into(), "b.io:80".into(), "c.io:443".into()])
    );
    assert_eq!(parse_hosts(""), Some(vec![]));
    assert_eq!(
        parse_hosts("ok.io bad/"),
        Some(vec!["ok.io:443".into(), "bad:443".into()])
    );
}

#[test]
fn allowed_hosts_take_the_env_url_else_the_default() {
    let profile = ProfileSandbox {
        state: vec![],
        config: vec![],
        api: vec![
            ApiEndpoint {
                env: "ANTHROPIC_BASE_URL".into(),
                default: "https://api.anthropic.com".into(),
            },
            ApiEndpoint {
                env: "OPENAI_BASE_URL".into(),
                default: "https://api.openai.com/v1".into(),
            },
        ],
    };
    let env = |k: &str| (k == "ANTHROPIC_BASE_URL").then(|| "http://127.0.0.1:4000".to_string());
    assert_eq!(
        allowed_hosts(&profile, env, &["x.io:443".into()]),
        vec!["127.0.0.1:4000", "api.openai.com:443", "x.io:443"]
    );
}

#[test]
fn rules_round_trip_through_the_one_argument() {
    use std::os::unix::ffi::OsStringExt;
    let odd = PathBuf::from(OsString::from_vec(b"/tmp/not-utf8-\xff".to_vec()));
    let rules = Rules {
        read: vec!["/usr".into(), odd],
        write: vec!["/work/p".into(), "/tmp/x y \"quoted\" --write /".into()],
        port: 4321,
        netns: Some("/run/h/proxy.sock".into()),
        held: Some(netns::Held {
            pid: 42,
            net: 4026532000,
            user: 4026531837,
            mnt: Some(4026532001),
            listens: true,
        }),
    };
    let args = vec![rules.to_arg(), "--".into(), "claude".into(), "-p".into()];
    let (back, command) = Rules::from_args(&args).unwrap();
    assert_eq!(back, rules);
    assert_eq!(command, &[OsString::from("claude"), OsString::from("-p")]);
    let good = rules.to_arg().into_string().unwrap();
    for bad in [
        vec![good.as_str(), "--"],
        vec![good.as_str(), "claude"],
        vec!["--read", "/a", "--", "a"],
        vec![
            r#"{"read":[],"write":[],"port":70000,"netns":null}"#,
            "--",
            "a",
        ],
        vec![
            r#"{"read":[],"write":[],"port":1,"netns":null,"more":1}"#,
            "--",
            "a",
        ],
    ] {
        let bad: Vec<OsString> = bad.into_iter().map(OsString::from).collect();
        assert!(Rules::from_args(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn rules_for_an_agent_leave_home_out() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let project = root.path().join("work/p");
    let tmp = root.path().join("tmp");
    for d in [
        &home.join(".ssh"),
        &home.join(".claude/projects"),
        &project,
        &tmp,
        &home.join(".cargo/bin"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".claude/.credentials.json"), "{}").unwrap();
    std::fs::write(home.join(".claude.json"), "{}").unwrap();
    let place = Place {
        cwd: &project,
        home: Some(&home),
        tmp: &tmp,
        program: Path::new("/usr/bin/env"),
        path: None,
        client_write: &[
            "~/.claude/projects/".into(),
            "~/.claude/.credentials.json".into(),
            "~".into(),
        ],
        client_config: &[
            "~/.claude/".into(),
            "~/.claude.json".into(),
            "~/.claude/projects/*/memory/".into(),
        ],
        extra_read: &["~/.cargo/bin".into(), "~/.rustup".into()],
        extra_write: &[],
        proxy_port: 9,
        netns: None,
        held: None,
    };
    let rules = Rules::for_agent(&place);
    assert_eq!(rules.port, 9);
    assert!(rules.write.contains(&project));
    assert!(rules.write.contains(&tmp));
    // The client's state is written, its configuration only read.
    assert!(rules.write.contains(&home.join(".claude/projects")));
    assert!(
        rules
            .write
            .contains(&home.join(".claude/.credentials.json"))
    );
    assert!(!rules.write.contains(&home.join(".claude")));
    assert!(rules.read.contains(&home.join(".claude")));
    assert!(rules.read.contains(&home.join(".claude.json")));
    assert!(rules.read.contains(&home.join(".cargo/bin")));
    // Missing paths and HOME itself are never named.
    for p in rules.read.iter().chain(&rules.write) {
        assert!(p.exists(), "{}", p.display());
        assert_ne!(p, &home);
        assert!(!p.starts_with(home.join(".ssh")), "{}", p.display());
    }
}

#[test]
fn a_linked_worktree_writes_its_own_git_dir_and_the_object_store_only() {
    let root = tempfile::tempdir().unwrap();
    let common = root.path().join("repo/.git");
    let own = common.join("worktrees/t1");
    std::fs::create_dir_all(&own).unwrap();
    for d in ["objects", "refs", "logs", "hooks"] {
        std::fs::create_dir_all(common.join(d)).unwrap();
    }
    std::fs::write(own.join("commondir"), "../..\n").unwrap();
    let wt = root.path().join("wt/t1");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", own.display())).unwrap();
    let (read, write) = worktree_git(&wt);
    let common = std::fs::canonicalize(&common).unwrap();
    assert_eq!(read, vec![common.clone()]);
    assert!(write.contains(&common.join("objects")));
    assert!(write.contains(&common.join("refs")));
    assert!(write.contains(&own));
    assert!(
        !write
            .iter()
            .any(|p| p.ends_with("hooks") || p.ends_with("config"))
    );
    assert_eq!(worktree_git(root.path()), (vec![], vec![]));
}

#[test]
fn missing_state_folders_are_made_private_and_files_never() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let entries: Vec<String> = [
        "~/.claude/",
        "~/.local/share/opencode/",
        "~/.codex/",
        "~/.claude.json",
        "~/",
        "/",
    ]
    .iter()
    .map(|e| (*e).to_string())
    .collect();
    let made = make_state_dirs(&entries, Some(&home)).unwrap();
    assert_eq!(
        made,
        [home.join(".claude"), home.join(".local/share/opencode")]
    );
    for d in &made {
        let mode = std::fs::metadata(d).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", d.display());
    }
    assert!(!home.join(".claude.json").exists());
    // A made folder is then granted by its `~/x/` entry.
    assert_eq!(
        expand("~/.claude/", Some(&home)),
        Some(home.join(".claude"))
    );
    assert_eq!(expand("~/", Some(&home)), None);
}

#[test]
fn an_npm_install_is_read_as_its_whole_node_modules_tree() {
    let cases = [
        (
            "/c/codex/node_modules/@openai/codex/bin",
            Some("/c/codex/node_modules"),
        ),
        ("/c/node_modules/.bin", Some("/c/node_modules")),
        (
            "/g/lib/node_modules/x/node_modules/y/bin",
            Some("/g/lib/node_modules"),
        ),
        ("/usr/local/bin", None),
    ];
    for (dir, want) in cases {
        assert_eq!(
            node_modules_of(Path::new(dir)),
            want.map(PathBuf::from),
            "{dir}"
        );
    }
}

/// Of /dev, the agent gets the null, zero and full devices (read and write) and the random
/// sources (read): never a terminal, `/dev/pts`, `/dev/shm` or the whole folder.
#[test]
fn the_agent_gets_only_the_devices_programs_need() {
    let root = tempfile::tempdir().unwrap();
    let place = Place {
        cwd: root.path(),
        home: None,
        tmp: root.path(),
        program: Path::new("/usr/bin/env"),
        path: None,
        client_write: &[],
        client_config: &[],
        extra_read: &[],
        extra_write: &[],
        proxy_port: 9,
        netns: None,
        held: None,
    };
    let rules = Rules::for_agent(&place);
    let devices: Vec<&PathBuf> = rules
        .read
        .iter()
        .chain(&rules.write)
        .filter(|p| p.starts_with("/dev"))
        .collect();
    for p in &devices {
        assert!(
            [
                "/dev/null",
                "/dev/zero",
                "/dev/full",
                "/dev/random",
                "/dev/urandom"
            ]
            .contains(&p.to_str().unwrap()),
            "{}",
            p.display()
        );
    }
    assert!(rules.write.contains(&PathBuf::from("/dev/null")));
    assert!(!rules.read.contains(&PathBuf::from("/dev/null")));
}

/// SANDBOX_READ/WRITE never grant a known credential file: not the file, not a folder that
/// holds one, not a path beneath one (as written or through a link); the warning names it.
#[test]
fn credential_files_are_never_granted() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    for d in [
        ".cargo/bin",
        ".cargo/registry",
        ".config/gh",
        ".ssh",
        ".npm/_cacache",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
    std::os::unix::fs::symlink(home.join(".cargo"), root.path().join("cargo-link")).unwrap();
    let link = root.path().join("cargo-link").display().to_string();
    let refused = [
        "~/.cargo",
        "~/.cargo/",
        "~/.cargo/credentials.toml",
        "~/.cargo/config.toml",
        "~/.npmrc",
        "~/.config",
        "~/.config/gh",
        "~/.config/gh/hosts.yml",
        "~/.ssh/id_ed25519",
        "~/.docker",
        link.as_str(),
    ];
    for entry in refused {
        let why = refused_grant(entry, Some(&home));
        assert!(
            why.as_deref().is_some_and(|w| w.contains(entry)),
            "{entry}: {why:?}"
        );
    }
    for entry in [
        "~/.cargo/bin",
        "~/.cargo/registry",
        "~/.npm/_cacache",
        "~/.rustup",
        "/opt/tools",
    ] {
        assert_eq!(refused_grant(entry, Some(&home)), None, "{entry}");
    }
    let project = root.path().join("p");
    std::fs::create_dir_all(&project).unwrap();
    let read: Vec<String> = vec!["~/.cargo".into(), "~/.cargo/bin".into()];
    let write: Vec<String> = vec!["~/.ssh".into()];
    let place = Place {
        cwd: &project,
        home: Some(&home),
        tmp: &project,
        program: Path::new("/usr/bin/env"),
        path: None,
        client_write: &[],
        client_config: &[],
        extra_read: &read,
        extra_write: &write,
        proxy_port: 9,
        netns: None,
        held: None,
    };
    let rules = Rules::for_agent(&place);
    assert!(rules.read.contains(&home.join(".cargo/bin")));
    assert!(!rules.read.contains(&home.join(".cargo")));
    assert!(!rules.write.contains(&home.join(".ssh")));
    assert_eq!(refused_grants(&read, &write, Some(&home)).len(), 2);
}

#[test]
fn a_program_in_a_python_venv_gets_the_venv_and_its_base_python() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("pythons/3.12");
    let venv = root.path().join("venvs/aider");
    std::fs::create_dir_all(base.join("bin")).unwrap();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!(
            "home = {}\ninclude-system-site-packages = false\n",
            base.join("bin").display()
        ),
    )
    .unwrap();
    let program = venv.join("bin/aider");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    let dirs = install_dirs(&program, None);
    assert!(dirs.contains(&venv), "{dirs:?}");
    assert!(dirs.contains(&base), "{dirs:?}");
    // A venv made from the system's Python names /usr/bin: /usr, never `/`.
    std::fs::write(venv.join("pyvenv.cfg"), "home = /bin\n").unwrap();
    let dirs = install_dirs(&program, None);
    assert!(!dirs.contains(&PathBuf::from("/")), "{dirs:?}");
    // No pyvenv.cfg: only the program's folder.
    std::fs::remove_file(venv.join("pyvenv.cfg")).unwrap();
    let dirs = install_dirs(&program, None);
    assert!(dirs.iter().all(|d| *d == venv.join("bin")), "{dirs:?}");
}

#[test]
fn the_reviewers_project_is_read_only_by_its_real_path_too() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let tmp = root.path().join("tmp");
    let mut rules = Rules {
        read: vec![],
        write: vec![link.clone(), real.clone(), tmp.clone()],
        port: 1,
        netns: None,
        held: None,
    };
    rules.read_only_in(&link);
    assert_eq!(rules.write, vec![tmp]);
    assert!(
        rules.read.contains(&real) && rules.read.contains(&link),
        "{rules:?}"
    );
}
