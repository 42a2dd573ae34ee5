//! What the real-client suites share: a built-in profile parsed by hank's own parser, a direct
//! call of a real agent CLI with the profile's argv (`Direct`: a temp HOME, a git project and
//! the fake API; `Call`: what the CLI printed; the fixture capture), and `hank run` in a git
//! project against a fake API (`HankRun`: the agent's environment, the events, the context
//! for assertion messages).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hank::agent::profile::{self, CallInput, Origin, Parser, Profile};
use hank::analysis::{Analysis, Clock, Outcome, RunFacts, analyze_mapped};
use hank::settings::OutputFormat;
use serde_json::Value;

use crate::http::{Fake, Provider};
use crate::support::{self, Project};

/// The built-in profile `name` (`templates/agents/<name>.toml`), parsed by hank's own parser.
pub(crate) fn builtin_profile(name: &str) -> Profile {
    let rel = format!("templates/agents/{name}.toml");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(&rel);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {rel}: {e}"));
    profile::parse(&text, &file.display().to_string(), name, Origin::Builtin)
        .unwrap_or_else(|e| panic!("the {name} profile does not parse: {e}"))
}

/// The argv `profile` gives for a json call (not live), resuming `session`, with `model` and
/// hank's PERMISSION_MODE `mode` when set.
pub(crate) fn argv(
    profile: &Profile,
    session: Option<&str>,
    model: Option<&str>,
    mode: Option<&str>,
) -> Vec<String> {
    profile.argv(&CallInput {
        live: false,
        output_format: OutputFormat::Json,
        session,
        model,
        permission_mode: mode,
        allowed_tools: &[],
        prompt: None,
        prompt_file: None,
    })
}

/// What hank's analyzer reads from a call's output with the profile's JSONPath fields (a call
/// killed at its time limit, `code` None, counts as timed out).
pub(crate) fn analyze(
    profile: &Profile,
    stdout: &[u8],
    stderr: &[u8],
    code: Option<i32>,
) -> Analysis {
    let Parser::Mapped(mapping) = &profile.parser else {
        panic!("the {} profile must use JSONPath fields", profile.name)
    };
    let facts = RunFacts {
        exit_code: code,
        timed_out: code.is_none(),
        ..RunFacts::default()
    };
    analyze_mapped(
        stdout,
        stderr,
        &facts,
        &Clock::utc(jiff::Timestamp::now()),
        mapping,
    )
}

/// At most the first `n` bytes of `s` (on a char boundary).
pub(crate) fn clip(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// At most the last `n` bytes of `s` (on a char boundary).
fn tail(s: &str, n: usize) -> &str {
    let mut from = s.len().saturating_sub(n);
    while !s.is_char_boundary(from) {
        from += 1;
    }
    &s[from..]
}

/// The JSON lines of a CLI's stdout.
pub(crate) fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("every JSON line parses"))
        .collect()
}

/// `a` read a plain answer with a status block: a success whose text is `answer`, whose
/// status block does not ask to exit and recommends `next`.
pub(crate) fn assert_status_answer(a: &Analysis, answer: &str, next: &str, ctx: &str) {
    assert_eq!(a.outcome, Outcome::Success, "{ctx}\n{a:#?}");
    assert_eq!(a.summary, answer, "{ctx}");
    let status = a.status.as_ref().expect("the status block is read");
    assert_eq!(status.exit_signal, Some(false));
    assert_eq!(a.recommendation(), Some(next), "{a:#?}");
}

/// The string `key` of the first JSON event on `stdout` that `pick` accepts (the session id a
/// CLI printed).
pub(crate) fn first_string(stdout: &str, pick: impl Fn(&Value) -> bool, key: &str) -> String {
    events(stdout)
        .iter()
        .find(|e| pick(e))
        .and_then(|e| e[key].as_str())
        .unwrap_or_else(|| panic!("an event with a {key}"))
        .to_string()
}

/// The prompts of a direct call and of the one that resumes it.
pub(crate) const PROMPT_ONE: &str = "Implement the first task (prompt ALPHA).\n";
pub(crate) const PROMPT_TWO: &str = "Now the second task (prompt BETA).\n";

/// What one CLI call printed.
pub(crate) struct Call {
    pub(crate) argv: Vec<String>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// None when the CLI was killed at its time limit.
    pub(crate) code: Option<i32>,
    pub(crate) took: Duration,
}

/// A direct call's world: a temp HOME, a git project, the fake API of provider `P`, and the
/// built-in profile of the CLI under test (`crate::agents::agent()`).
pub(crate) struct Direct<P: Provider> {
    _root: tempfile::TempDir,
    /// The temp folder holding `home/`, `proj/` and `api.log`.
    pub(crate) root: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) proj: PathBuf,
    pub(crate) api: Fake<P>,
    pub(crate) profile: Profile,
}

impl<P: Provider> Direct<P> {
    /// The project holds `README.md` with `readme`, committed; the fake API plays the script
    /// built from the project's path; `profile` names the built-in profile.
    pub(crate) fn new(
        profile: &str,
        readme: &str,
        script: impl FnOnce(&Path) -> Vec<P::Reply>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let home = root.join("home");
        let proj = root.join("proj");
        std::fs::create_dir_all(&home).expect("mkdir");
        std::fs::create_dir_all(&proj).expect("mkdir");
        std::fs::write(proj.join("README.md"), readme).expect("write");
        support::git_commit_all(&proj, &home);
        let api = Fake::start(script(&proj), Some(&root.join("api.log")));
        Self {
            _root: dir,
            root,
            home,
            proj,
            api,
            profile: builtin_profile(profile),
        }
    }

    /// The real CLI with `argv` in the project: a clean environment (PATH with the CLI's own
    /// folder first, HOME, LANG, no system git config, the profile's `env`), its own process
    /// group.
    pub(crate) fn command(&self, argv: &[String]) -> Command {
        let bin = crate::agents::agent().path;
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            bin.parent()
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
        let mut c = Command::new(&bin);
        c.args(argv)
            .current_dir(&self.proj)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .envs(self.profile.env.iter())
            .process_group(0);
        c
    }

    /// Runs `cmd` (made by [`Direct::command`] with `argv`) with `prompt` on stdin. After
    /// `limit` its whole group is killed: what it printed is returned when `kill_at_limit`
    /// (as hank's timeout would), else the case fails.
    pub(crate) fn run(
        &self,
        mut cmd: Command,
        argv: Vec<String>,
        prompt: &str,
        limit: Duration,
        kill_at_limit: bool,
    ) -> Call {
        let start = Instant::now();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.profile.name));
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(prompt.as_bytes())
            .expect("write the prompt");
        let o = match support::wait_or_kill(child, limit, true) {
            Ok(o) => o,
            Err(o) if kill_at_limit => o,
            Err(o) => panic!(
                "{} still running after {limit:?}{}",
                self.profile.name,
                support::outputs(&o)
            ),
        };
        Call {
            argv,
            stdout: String::from_utf8_lossy(&o.stdout).to_string(),
            stderr: String::from_utf8_lossy(&o.stderr).to_string(),
            code: o.status.code(),
            took: start.elapsed(),
        }
    }

    /// With `HANK_CAPTURE_FIXTURES=DIR`, saves what the call printed as `DIR/<name>.stdout`,
    /// `.stderr`, `.exit` and its argv as `.argv` (the program, then one argument a line): how
    /// `fixtures/agents/*/` were made.
    pub(crate) fn capture(&self, name: &str, call: &Call) {
        let Some(dir) = std::env::var_os("HANK_CAPTURE_FIXTURES") else {
            return;
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("mkdir capture dir");
        let exit = call
            .code
            .map_or_else(|| "signal".to_string(), |c| c.to_string());
        let mut argv = format!("{}\n", self.profile.name);
        for a in &call.argv {
            argv.push_str(a);
            argv.push('\n');
        }
        for (ext, text) in [
            ("stdout", call.stdout.clone()),
            ("stderr", call.stderr.clone()),
            ("exit", format!("{exit}\n")),
            ("argv", argv),
        ] {
            std::fs::write(dir.join(format!("{name}.{ext}")), text).expect("write");
        }
    }

    /// Keeps `call`'s output as the fixture `name` ([`Direct::capture`]); the call and its
    /// context.
    pub(crate) fn captured(&self, name: &str, call: Call) -> (Call, String) {
        self.capture(name, &call);
        let ctx = self.context(&call);
        (call, ctx)
    }

    /// The project's file `rel` ("" when it is missing).
    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.proj.join(rel)).unwrap_or_default()
    }

    /// The subject of the project's newest commit.
    pub(crate) fn last_commit(&self) -> String {
        support::git(&self.proj, &["log", "--format=%s", "-1"])
    }

    /// Keeps `call` as the fixture `name`: the call, what the profile reads from it, its
    /// context and how many turns the fake API answered (a failing call's facts).
    pub(crate) fn outcome(&self, name: &str, call: Call) -> (Call, Analysis, String, usize) {
        let (call, ctx) = self.captured(name, call);
        let a = self.analyze(&call);
        (call, a, ctx, self.api.turns().len())
    }

    /// `second` resumed the session `id`: exit 0, a success with a status block in the same
    /// session, and the fake API answered two turns (the first call's and this one). What the
    /// profile reads from it.
    pub(crate) fn assert_resumed(&self, second: &Call, id: &str, ctx: &str) -> Analysis {
        assert_eq!(second.code, Some(0), "{ctx}");
        let a = self.analyze(second);
        assert_eq!(a.outcome, Outcome::Success, "{ctx}\n{a:#?}");
        assert_eq!(a.session_id.as_deref(), Some(id), "same session: {ctx}");
        assert!(a.status.is_some(), "{a:#?}");
        assert_eq!(self.api.turns().len(), 2, "{ctx}");
        a
    }

    /// What hank's analyzer reads from `call` with the profile.
    pub(crate) fn analyze(&self, call: &Call) -> Analysis {
        analyze(
            &self.profile,
            call.stdout.as_bytes(),
            call.stderr.as_bytes(),
            call.code,
        )
    }

    /// The call and the API requests, for assertion messages.
    pub(crate) fn context(&self, call: &Call) -> String {
        let mut s = format!(
            "argv: {:?}\nexit: {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}\n--- requests\n",
            call.argv,
            call.code,
            call.took,
            clip(&call.stdout, 3000),
            clip(&call.stderr, 3000)
        );
        for r in self.api.requests() {
            s.push_str(&format!(
                "{} {} {}\n",
                r.method,
                r.path,
                clip(&r.text(), 400)
            ));
        }
        s
    }
}

/// A session id no client knows ([`HankRun::plant_stale_session`]).
pub(crate) const STALE_SESSION: &str = "0b7c6a52-9d7e-4c1f-8f3a-1e2d3c4b5a69";

/// `hank` in a git project against the fake API of provider `P`, with the agent's environment
/// and first arguments on every command.
pub(crate) struct HankRun<P: Provider> {
    pub(crate) p: Project,
    pub(crate) api: Fake<P>,
    env: Vec<(String, OsString)>,
    args: Vec<String>,
}

impl<P: Provider> HankRun<P> {
    /// A git project with `items`, and the fake API playing the script built from it.
    pub(crate) fn new(items: &[&str], script: impl FnOnce(&Project) -> Vec<P::Reply>) -> Self {
        let p = Project::new(items);
        p.git_init();
        let log = p.dir.parent().expect("parent").join("api.log");
        let api = Fake::start(script(&p), Some(&log));
        Self {
            p,
            api,
            env: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Every command gets `name=value` in its environment.
    pub(crate) fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.to_string(), value.into()));
        self
    }

    /// Every command runs with `SANDBOX=landlock`: the agent confined by the real Landlock of
    /// this kernel, its only way out hank's egress proxy (a kernel without it fails the case).
    pub(crate) fn sandboxed(self) -> Self {
        self.env("SANDBOX", "landlock")
    }

    /// The run was confined (status.json's `sandbox` line says landlock) and the egress proxy
    /// refused only hosts of `background`: the client's own calls that the work does not need
    /// (feature flags, update checks), never its API.
    /// Where hank can make a network namespace here (root, as in CI, or user namespaces), the
    /// client ran in one, the proxy its only way out.
    pub(crate) fn assert_confined(&self, background: &[&str], ctx: &str) {
        let s = self.p.status();
        let sandbox = s["sandbox"].as_str().unwrap_or_default();
        let netns = Command::new(support::hank_bin())
            .args(["__sandbox", "--probe-netns"])
            .output()
            .is_ok_and(|o| o.status.success());
        let extras = hank::sandbox::Extras::here();
        let mut parts = String::from("landlock-fs+landlock-net");
        for (has, part) in [
            (extras.ioctl_dev, "+landlock-ioctl"),
            (extras.scopes, "+landlock-scope"),
            (netns, "+netns"),
        ] {
            if has {
                parts.push_str(part);
            }
        }
        assert!(sandbox.starts_with(&format!("{parts}: ")), "{s}\n{ctx}");
        eprintln!("sandbox: {sandbox}");
        for e in self.of_type("egress_denied") {
            let host = e["host"].as_str().unwrap_or_default();
            assert!(background.contains(&host), "refused {host}: {ctx}");
        }
    }

    /// Every command starts with `args` (`--agent codex`).
    pub(crate) fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_string()));
        self
    }

    /// `hank ARGS` with the agent's environment and first arguments.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.p.cmd();
        c.envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(&self.args)
            .args(args);
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run hank")
    }

    /// Runs `cmd` (one of [`HankRun::cmd`]'s): its output and [`HankRun::context`].
    pub(crate) fn output(&self, cmd: &mut Command) -> (Output, String) {
        let o = cmd.output().expect("run hank");
        let ctx = self.context(&o);
        (o, ctx)
    }

    /// The events of type `kind`.
    pub(crate) fn of_type(&self, kind: &str) -> Vec<Value> {
        self.p
            .events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }

    /// The `agent_finished` events.
    pub(crate) fn finished(&self) -> Vec<Value> {
        self.of_type("agent_finished")
    }

    /// The `error_kind` of each loop (null for a success).
    pub(crate) fn error_kinds(&self) -> Vec<Value> {
        self.finished()
            .iter()
            .map(|f| f["error_kind"].clone())
            .collect()
    }

    /// Each of `items` was done in one loop: `src/<item>.txt` holds `<item> done`, and each
    /// loop's `agent_finished` is a success that checked one plan item and changed a file.
    /// The `agent_finished` events.
    pub(crate) fn assert_items_done(&self, items: &[&str], ctx: &str) -> Vec<Value> {
        for item in items {
            assert_eq!(
                std::fs::read_to_string(self.p.dir.join(format!("src/{item}.txt")))
                    .unwrap_or_default(),
                format!("{item} done\n"),
                "the agent wrote src/{item}.txt: {ctx}"
            );
        }
        let finished = self.finished();
        assert_eq!(finished.len(), items.len(), "{ctx}");
        for f in &finished {
            assert_eq!(f["outcome"], "success", "{f}\n{ctx}");
            assert_eq!(f["plan_items_checked"], 1, "{f}\n{ctx}");
            // src/<item>.txt (hank's own .hank/ files are not counted as work).
            assert!(f["files_changed"].as_u64().unwrap_or(0) >= 1, "{f}\n{ctx}");
        }
        finished
    }

    /// The run `o` stopped after its one loop, an agent error of `kind`: exit 3, exit reason
    /// `kind` (waiting does not help).
    pub(crate) fn assert_stopped_at_once(&self, o: &Output, kind: &str, ctx: &str) {
        assert_eq!(o.status.code(), Some(3), "{ctx}");
        let s = self.p.status();
        assert_eq!(s["exit_reason"], kind, "{s}\n{ctx}");
        let finished = self.finished();
        assert_eq!(finished.len(), 1, "{ctx}");
        assert_eq!(finished[0]["outcome"], "agent_error", "{ctx}");
        assert_eq!(finished[0]["error_kind"], kind, "{ctx}");
    }

    /// Loop 2 resumed loop 1's session: both loops succeeded in that one session, the fake
    /// API answered one turn each, and loop 2's turn carries its own loop context. The
    /// `agent_finished` events and the session id.
    pub(crate) fn assert_second_loop_resumed(&self, ctx: &str) -> (Vec<Value>, String) {
        assert_eq!(self.resumed(), [false, true], "{ctx}");
        let finished = self.finished();
        assert_eq!(finished.len(), 2, "{ctx}");
        for f in &finished {
            assert_eq!(f["outcome"], "success", "{f}\n{ctx}");
        }
        let session = finished[0]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a session id: {ctx}"))
            .to_string();
        assert_eq!(finished[1]["session_id"], session, "one session: {ctx}");
        let turns = self.api.turns();
        assert_eq!(turns.len(), 2, "{ctx}");
        let ctx2 = turns[1].loop_context().unwrap_or_default();
        assert!(ctx2.contains("Hank loop 2"), "{ctx2}");
        (finished, session)
    }

    /// Writes a `.hank/state.json` from elsewhere: its session [`STALE_SESSION`] (the
    /// session of `agent` when given, else of claude) is one the client does not know.
    pub(crate) fn plant_stale_session(&self, agent: Option<&str>) {
        let now = jiff::Timestamp::now().to_string();
        let mut state = serde_json::json!({
            "schema_version": 1,
            "session": {"id": STALE_SESSION, "started_at": now, "last_used_at": now}
        });
        if let Some(agent) = agent {
            state["agents"] = serde_json::json!({"current": agent});
        }
        std::fs::write(self.p.dir.join(".hank/state.json"), state.to_string()).expect("write");
    }

    /// The run `o` (`--max-loops 2`) began with the stale session of
    /// [`HankRun::plant_stale_session`]: the client refused it in loop 1 (its stderr says
    /// `refusal`), hank dropped it and the last loop succeeded in a fresh session; exit 3.
    pub(crate) fn assert_started_fresh(&self, o: &Output, refusal: &str, ctx: &str) {
        assert_eq!(o.status.code(), Some(3), "{ctx}");
        let err = std::fs::read_to_string(self.p.dir.join(".hank/logs/loop-00001.err"))
            .unwrap_or_default();
        assert!(err.contains(refusal), "{ctx}");
        let finished = self.finished();
        let last = finished.last().expect("a loop");
        assert_eq!(last["outcome"], "success", "{ctx}");
        assert_ne!(last["session_id"], STALE_SESSION, "{ctx}");
        assert!(!self.api.turns().is_empty(), "{ctx}");
    }

    /// The reason of each wait.
    pub(crate) fn wait_reasons(&self) -> Vec<Value> {
        self.of_type("waiting")
            .iter()
            .map(|e| e["reason"].clone())
            .collect()
    }

    /// Whether each loop resumed a session (the `loop_started` events' `resume`).
    pub(crate) fn resumed(&self) -> Vec<bool> {
        self.of_type("loop_started")
            .iter()
            .map(|e| e["resume"] == true)
            .collect()
    }

    /// hank's stderr, the loop logs and the API requests: for assertion messages.
    pub(crate) fn context(&self, o: &Output) -> String {
        let mut s = format!("--- hank stderr\n{}\n", support::stderr(o));
        for n in 1..=4 {
            for ext in ["out", "err"] {
                let f = self.p.dir.join(format!(".hank/logs/loop-{n:05}.{ext}"));
                if let Ok(t) = std::fs::read_to_string(&f) {
                    s.push_str(&format!("--- loop {n} {ext}\n{}\n", clip(&t, 3000)));
                }
            }
        }
        s.push_str("--- API requests\n");
        for r in self.api.requests() {
            let body = r.text();
            s.push_str(&format!("{} {} …{}\n", r.method, r.path, tail(&body, 600)));
        }
        s
    }
}
