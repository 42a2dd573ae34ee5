//! What looks like a secret in what a delivery commits and pushes. **\[pure\]**
//!
//! One list of names for both places: the delivery commit leaves such files out of what
//! hank stages itself ([`looks_like_secret`]), and the scan of every commit about to be
//! pushed (`deliver::scan`) refuses a push that adds one — by its name ([`why_named`]) or its
//! content ([`why_content`]: a private key's header, a token shape the redactor knows) —
//! unless `DELIVER_ALLOW_FILES` allows its path ([`allowed`]).

use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;

/// Names of files that hold credentials by convention.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".envrc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".npmrc",
    ".htpasswd",
    "credentials.json",
];
/// `.env.*` files that are templates, not secrets.
const ENV_TEMPLATES: &[&str] = &["example", "sample", "template", "dist", "defaults"];
/// Extensions of private keys, key stores and secret variable files.
const SECRET_EXTENSIONS: &[&str] = &[
    "pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk", "tfvars",
];
/// SSH private keys (their `.pub` halves are public).
const SSH_KEY_PREFIXES: &[&str] = &["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];

/// Why this path (relative, `/`-separated, as git prints it) looks like it holds a secret,
/// `None` when it does not: `.env` and `.env.*` (not `.env.example`, `.sample`, `.template`,
/// `.dist`, `.defaults`), `.envrc`, `.netrc`, `.git-credentials`, `.pgpass`, `.pypirc`,
/// `.npmrc`, `.htpasswd`, `credentials*.json`, anything under `.aws/`,
/// `.docker/config.json`, `.cargo/credentials*`, `gh/hosts.yml`, private keys, key stores
/// and variable files (`*.pem`, `*.key`,
/// `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `*.kdbx`, `*.ppk`, `*.tfvars`), `*_key` and SSH
/// keys (`id_rsa*`, `id_dsa*`, `id_ecdsa*`, `id_ed25519*`, an `id_*` without an extension;
/// never `*.pub`).
#[must_use]
pub fn why_named(path: &str) -> Option<&'static str> {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let dirs: Vec<&str> = lower.split('/').collect();
    let parent = dirs.len().checked_sub(2).and_then(|i| dirs.get(i)).copied();
    if name.ends_with(".pub") {
        return None;
    }
    if SECRET_NAMES.contains(&name) {
        return Some("a credentials file by its name");
    }
    if name.starts_with("credentials") && name.ends_with(".json") {
        return Some("a credentials file by its name");
    }
    if dirs[..dirs.len().saturating_sub(1)].contains(&".aws") {
        return Some("AWS credentials or configuration (.aws/)");
    }
    if parent == Some(".docker") && name == "config.json" {
        return Some("Docker registry credentials (.docker/config.json)");
    }
    if parent == Some(".cargo") && name.starts_with("credentials") {
        return Some("a crates.io token (.cargo/credentials)");
    }
    if lower.ends_with(".config/gh/hosts.yml") || lower == "gh/hosts.yml" {
        return Some("GitHub CLI credentials (gh/hosts.yml)");
    }
    if let Some(rest) = name.strip_prefix(".env.") {
        return (!ENV_TEMPLATES.contains(&rest)).then_some("an environment file (.env*)");
    }
    if SSH_KEY_PREFIXES.iter().any(|p| name.starts_with(p))
        || (name.starts_with("id_") && name.len() > 3 && !name.contains('.'))
    {
        return Some("an SSH private key by its name");
    }
    if name.len() > 4 && name.ends_with("_key") {
        return Some("a key file by its name (*_key)");
    }
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && SECRET_EXTENSIONS.contains(&ext))
        .then_some("a private key, key store or secret variables file by its extension")
}

/// A path that looks like it holds a secret ([`why_named`]). A delivery never commits them.
#[must_use]
pub fn looks_like_secret(path: &str) -> bool {
    why_named(path).is_some()
}

/// Why this file's content looks like a secret: a private key's header (`-----BEGIN …
/// PRIVATE KEY-----`, PGP's `PRIVATE KEY BLOCK` too) or a credential-shaped word the
/// redactor knows ([`token_shape`]); `None` when neither is in it.
#[must_use]
pub fn why_content(text: &str) -> Option<String> {
    if let Some(at) = text.find("-----BEGIN ") {
        let rest = &text[at + "-----BEGIN ".len()..];
        if let Some(end) = rest.find("-----") {
            let label = &rest[..end];
            if label.len() <= 40
                && label.ends_with("PRIVATE KEY")
                && label.chars().all(|c| c.is_ascii_uppercase() || c == ' ')
            {
                return Some(format!("contains a private key (-----BEGIN {label}-----)"));
            }
            if label.len() <= 40 && label.ends_with("PRIVATE KEY BLOCK") {
                return Some("contains a PGP private key block".to_string());
            }
        }
        // A later header in the same file.
        if let Some(why) = why_content(rest) {
            return Some(why);
        }
        return token_shape(text).map(|k| format!("contains {k}"));
    }
    token_shape(text).map(|k| format!("contains {k}"))
}

/// Whether `path` matches one of the `DELIVER_ALLOW_FILES` patterns: a pattern matches the
/// whole path, and a pattern without `/` also the file's name; `*` matches within one path
/// part, `**` across parts, `?` one character.
#[must_use]
pub fn allowed(path: &str, patterns: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    patterns.iter().map(|p| p.trim()).any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p);
        glob(p.as_bytes(), path.as_bytes())
            || (!p.contains('/') && glob(p.as_bytes(), name.as_bytes()))
    })
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) if rest.first() == Some(&b'*') => {
            let rest = &rest[1..];
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        Some((b'*', rest)) => {
            let part = s.iter().position(|c| *c == b'/').unwrap_or(s.len());
            (0..=part).any(|i| glob(rest, &s[i..]))
        }
        Some((b'?', rest)) => s.first().is_some_and(|c| *c != b'/') && glob(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// One file a commit about to be pushed adds or changes that looks like a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The commit (full id).
    pub commit: String,
    /// The file's path in it.
    pub path: String,
    /// Why: its name, or what its content holds.
    pub why: String,
}

/// The refusal of a push with these hits: each file named with its commit and why, and how
/// to go on.
#[must_use]
pub fn refusal(remote: &str, branch: &str, hits: &[Hit], skipped: &[String]) -> String {
    let mut s = format!(
        "refusing to push {} to {}: the commits to be pushed add files that look like secrets:",
        crate::sanitize::line(branch),
        crate::sanitize::line(remote)
    );
    for h in hits {
        let _ = write!(
            s,
            "\n  {} {}: {}",
            h.commit.get(..12).unwrap_or(&h.commit),
            crate::sanitize::line(&h.path),
            h.why
        );
    }
    s.push_str("\nnothing was pushed. Remove them from the history (e.g. `git rm --cached FILE` and rewrite the commits), or allow a file on purpose with DELIVER_ALLOW_FILES=PATH (.hankrc or the environment)");
    if !skipped.is_empty() {
        let _ = write!(
            s,
            "\n(not read for content, larger than {} MiB: {})",
            MAX_SCANNED_BLOB >> 20,
            skipped
                .iter()
                .map(|p| crate::sanitize::line(p))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s
}

/// The largest file whose content is scanned (a larger one is checked by its name only).
pub const MAX_SCANNED_BLOB: u64 = 1024 * 1024 - 4096;

/// Credentials recognisable by their shape alone (set in the environment or not): Anthropic
/// keys, GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab
/// (`glpat-`, deploy `gldt-`, runner `glrt-`, trigger `glptt-`, feed `glft-`, `glsoat-`,
/// `glcbt-`), npm (`npm_`), AWS access key ids (`AKIA…`), Slack (`xox?-`), crates.io (`cio` + 32
/// letters and digits), PyPI (`pypi-AgEIcHlwaS5vcmc…`, the macaroon for pypi.org), Docker Hub
/// (`dckr_pat_`), Hugging Face (`hf_`), OpenAI project/service keys (`sk-proj-`,
/// `sk-svcacct-`, `sk-admin-`), Stripe live keys (`sk_live_`, `rk_live_`) and Google API keys
/// (`AIza…`). The
/// redactor replaces them; delivery's scan of pushed commits (`policy::secrets`) refuses
/// them. Each alternative is one group, in the order of `TOKEN_KINDS`.
pub static TOKEN_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    crate::analysis::re(concat!(
        r"(sk-ant-[A-Za-z0-9_\-]{20,})",
        r"|\b(gh[pousr]_[A-Za-z0-9]{30,})",
        r"|\b(github_pat_[A-Za-z0-9_]{30,})",
        r"|\b((?:glpat|gldt|glrt|glptt|glft|glsoat|glcbt)-[A-Za-z0-9_\-]{20,})",
        r"|\b(npm_[A-Za-z0-9]{36,})",
        r"|\b((?:AKIA|ASIA)[0-9A-Z]{16})\b",
        r"|\b(xox[abposr]-[A-Za-z0-9-]{10,})",
        r"|\b(cio[A-Za-z0-9]{32})\b",
        r"|\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})",
        r"|\b(dckr_pat_[A-Za-z0-9_\-]{27,})",
        r"|\b(hf_[A-Za-z0-9]{34,})",
        r"|\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,})",
        r"|\b((?:sk|rk)_live_[A-Za-z0-9]{20,})",
        r"|\b(AIza[0-9A-Za-z_\-]{35})",
    ))
});

/// What each group of [`TOKEN_SHAPES`] is.
const TOKEN_KINDS: &[&str] = &[
    "an Anthropic API key",
    "a GitHub token",
    "a GitHub token",
    "a GitLab token",
    "an npm token",
    "an AWS access key id",
    "a Slack token",
    "a crates.io token",
    "a PyPI token",
    "a Docker Hub token",
    "a Hugging Face token",
    "an OpenAI API key",
    "a Stripe live key",
    "a Google API key",
];

/// The first credential-shaped word in `text` (the shapes the redactor replaces): what it is, `None`
/// when there is none.
#[must_use]
pub fn token_shape(text: &str) -> Option<&'static str> {
    let c = TOKEN_SHAPES.captures(text)?;
    (1..c.len())
        .find(|i| c.get(*i).is_some())
        .and_then(|i| TOKEN_KINDS.get(i - 1).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_table() {
        let secret = [
            ".env",
            "app/.env.local",
            ".env.production",
            ".envrc",
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            "deploy/server.pem",
            "tls.KEY",
            "certs/store.p12",
            "certs/store.pfx",
            "id_rsa",
            "home/.ssh/id_ed25519",
            "id_ecdsa_old",
            "id_work",
            "keys/deploy_key",
            "ssh_host_rsa_key",
            ".aws/credentials",
            "x/.aws/config",
            "credentials.json",
            "gcp/credentials-prod.json",
            ".docker/config.json",
            ".cargo/credentials.toml",
            "home/.cargo/credentials",
            ".config/gh/hosts.yml",
            "prod.tfvars",
            "infra/secrets.TFVARS",
        ];
        for p in secret {
            assert!(looks_like_secret(p), "{p}");
        }
        let fine = [
            ".env.example",
            "app/.env.sample",
            ".env.template",
            "id_rsa.pub",
            "keys/deploy_key.pub",
            "src/keys.rs",
            "src/api_key.rs",
            "docs/key.md",
            "environment.ts",
            ".pem",
            "README.md",
            "src/credentials.rs",
            "monkey",
            "id_generator.rs",
            "config.json",
            "docker/config.json",
            ".cargo/config.toml",
            "src/credentials/mod.rs",
            "hosts.yml",
            "_key",
            "variables.tf",
        ];
        for p in fine {
            assert!(!looks_like_secret(p), "{p}");
        }
    }

    #[test]
    fn content_table() {
        let gh = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
        let cases: Vec<(String, Option<&str>)> = vec![
            (
                "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n".into(),
                Some("private key"),
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\n".into(),
                Some("private key"),
            ),
            (
                "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n".into(),
                Some("private key"),
            ),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\n".into(),
                Some("PGP"),
            ),
            (format!("export GH_TOKEN={gh}\n"), Some("GitHub token")),
            (
                "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n"
                    .into(),
                Some("npm token"),
            ),
            ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n".into(), Some("AWS")),
            (
                format!("key: sk-ant-api03-{}\n", "Zq8vR2mTx7".repeat(3)),
                Some("Anthropic"),
            ),
            (
                format!("[registry]\ntoken = \"cio{}\"\n", "aB3dE5gH7j".repeat(3) + "kL"),
                Some("crates.io token"),
            ),
            (
                format!("password = pypi-AgEIcHlwaS5vcmc{}\n", "CJDk4ZT-x_".repeat(6)),
                Some("PyPI token"),
            ),
            (
                format!("echo dckr_pat_{} | docker login\n", "Ab1_Cd2-Ef".repeat(3)),
                Some("Docker Hub token"),
            ),
            (
                format!("GITLAB=glpat-{}\ndeploy: gldt-{}\n", "x".repeat(20), "y".repeat(20)),
                Some("GitLab token"),
            ),
            (
                format!("runner: glrt-{}\n", "Zz9_".repeat(6)),
                Some("GitLab token"),
            ),
            (
                format!("HF_TOKEN=hf_{}\n", "aBcDeFgHiJ".repeat(4)),
                Some("Hugging Face token"),
            ),
            (
                format!("OPENAI_API_KEY=sk-proj-{}\n", "Qw3_Er4-Ty".repeat(4)),
                Some("OpenAI API key"),
            ),
            (
                format!("stripe: sk_live_{}\n", "51HxYz0123".repeat(3)),
                Some("Stripe live key"),
            ),
            (
                format!("key=AIza{}\n", "SyD-abc_123".repeat(3) + "xy"),
                Some("Google API key"),
            ),
            // Near misses: too short, a longer word, a prefix alone, a test-mode key.
            (format!("cio{}\n", "a".repeat(31)), None),
            (format!("cio{}\n", "a".repeat(40)), None),
            ("pypi-AgEIcHlwaS5vcmc\n".into(), None),
            ("dckr_pat_\n".into(), None),
            (format!("sk_test_{}\n", "a".repeat(24)), None),
            ("a social network\n".into(), None),
            ("-----BEGIN CERTIFICATE-----\nabc\n".into(), None),
            ("-----BEGIN PUBLIC KEY-----\n".into(), None),
            ("let prefix = \"sk-ant-\";\n".into(), None),
            ("ghp_short\n".into(), None),
            ("plain text about a PRIVATE KEY\n".into(), None),
        ];
        for (text, want) in cases {
            let got = why_content(&text);
            match want {
                Some(w) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(w)),
                    "{text:?}: {got:?}"
                ),
                None => assert_eq!(got, None, "{text:?}"),
            }
        }
    }

    #[test]
    fn allow_patterns() {
        let pats = |p: &[&str]| p.iter().map(ToString::to_string).collect::<Vec<_>>();
        let cases: &[(&str, &[&str], bool)] = &[
            ("prod.tfvars", &["prod.tfvars"], true),
            ("infra/prod.tfvars", &["prod.tfvars"], true),
            ("infra/prod.tfvars", &["infra/prod.tfvars"], true),
            ("infra/prod.tfvars", &["./infra/prod.tfvars"], true),
            ("other/prod.tfvars", &["infra/prod.tfvars"], false),
            ("test/fixtures/a.pem", &["test/fixtures/*.pem"], true),
            ("test/fixtures/x/a.pem", &["test/fixtures/*.pem"], false),
            ("test/fixtures/x/a.pem", &["test/**/*.pem"], true),
            ("test/a.pem", &["test/**/*.pem"], true),
            ("a.pem", &["*.pem"], true),
            ("deep/a.pem", &["*.pem"], true),
            (".env", &["prod.tfvars", " .env "], true),
            (".env", &["prod.tfvars"], false),
            ("id_rsa", &["id_?sa"], true),
            (".env", &[], false),
        ];
        for (path, p, want) in cases {
            assert_eq!(allowed(path, &pats(p)), *want, "{path} {p:?}");
        }
    }

    #[test]
    fn the_refusal_names_each_file() {
        let hits = vec![
            Hit {
                commit: "0123456789abcdef0123".into(),
                path: ".env".into(),
                why: "an environment file (.env*)".into(),
            },
            Hit {
                commit: "fedcba9876543210fedc".into(),
                path: "notes/x\u{1b}[31m.txt".into(),
                why: "contains a GitHub token".into(),
            },
        ];
        let s = refusal("origin", "hank/main", &hits, &["big.bin".into()]);
        for want in [
            "origin",
            "hank/main",
            "0123456789ab .env: an environment file",
            "fedcba987654 notes/x",
            "DELIVER_ALLOW_FILES",
            "big.bin",
        ] {
            assert!(s.contains(want), "{want}: {s}");
        }
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
