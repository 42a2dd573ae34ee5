use super::*;

#[test]
fn decisions_per_mode_and_kernel() {
    let ns = || Ok(());
    let no_ns = || Err("unshare(CLONE_NEWNET): EPERM".to_string());
    assert_eq!(
        decide(Mode::Auto, true, ns),
        Ok(Confinement::Landlock { netns: Ok(()) })
    );
    assert_eq!(
        decide(Mode::Landlock, true, no_ns),
        Ok(Confinement::Landlock {
            netns: Err("unshare(CLONE_NEWNET): EPERM".into())
        })
    );
    assert!(matches!(
        decide(Mode::Auto, false, ns),
        Ok(Confinement::Unconfined { warn: true, .. })
    ));
    for available in [true, false] {
        let asked = std::cell::Cell::new(false);
        assert!(matches!(
            decide(Mode::Off, available, || {
                asked.set(true);
                Ok(())
            }),
            Ok(Confinement::Unconfined { warn: false, .. })
        ));
        assert!(!asked.get(), "no namespace probe when unconfined");
    }
    let refused = decide(Mode::Landlock, false, ns).unwrap_err();
    assert!(refused.contains("SANDBOX=landlock"), "{refused}");
}

/// Status never claims more than the run got: each part named, and what stays open.
#[test]
fn descriptions_name_the_parts_the_agent_gets() {
    let with = Confinement::Landlock { netns: Ok(()) }.describe();
    assert!(
        with.starts_with("landlock-fs+landlock-net+netns: "),
        "{with}"
    );
    assert!(with.ends_with("still open: CPU and memory"), "{with}");
    let without = Confinement::Landlock {
        netns: Err("no privilege".into()),
    }
    .describe();
    assert!(
        without.starts_with("landlock-fs+landlock-net: "),
        "{without}"
    );
    assert!(
        without.contains("still open: UDP (DNS included), other hosts on the proxy's own port"),
        "{without}"
    );
    assert!(
        without.ends_with("(no network namespace: no privilege)"),
        "{without}"
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
        write: vec![],
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
fn rules_round_trip_through_the_arguments() {
    let rules = Rules {
        read: vec!["/usr".into()],
        write: vec!["/work/p".into(), "/tmp/x y".into()],
        port: 4321,
        netns: Some("/run/h/proxy.sock".into()),
    };
    let mut args = rules.to_args();
    args.extend(["--".into(), "claude".into(), "-p".into()]);
    let (back, command) = Rules::from_args(&args).unwrap();
    assert_eq!(back, rules);
    assert_eq!(command, &[OsString::from("claude"), OsString::from("-p")]);
    for bad in [
        vec!["--port", "1"],
        vec!["--port", "x", "--", "a"],
        vec!["--read", "/a", "--", "a"],
        vec!["--what", "1", "--", "a"],
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
        &home.join(".claude"),
        &project,
        &tmp,
        &home.join(".cargo"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let place = Place {
        cwd: &project,
        home: Some(&home),
        tmp: &tmp,
        program: Path::new("/usr/bin/env"),
        path: None,
        client_write: &["~/.claude".into(), "~/.claude.json".into(), "~".into()],
        extra_read: &["~/.cargo".into(), "~/.rustup".into()],
        extra_write: &[],
        proxy_port: 9,
        netns: None,
    };
    let rules = Rules::for_agent(&place);
    assert_eq!(rules.port, 9);
    assert!(rules.write.contains(&project));
    assert!(rules.write.contains(&tmp));
    assert!(rules.write.contains(&home.join(".claude")));
    assert!(rules.read.contains(&home.join(".cargo")));
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
