//! HTML text **[pure]**: [`esc`], the one escape every text from a record goes through (the
//! agent's log lines, findings, messages, task names), and [`page`], the shell of every page
//! (`templates/serve/page.html`, compiled in).

/// The page shell: `{{title}}`, `{{nav}}`, `{{live}}` (what the live updates watch) and
/// `{{main}}` are replaced.
const SHELL: &str = include_str!("../../templates/serve/page.html");

/// The stylesheet served at `/static/app.css`.
pub(crate) const CSS: &str = include_str!("../../templates/serve/app.css");

/// The script served at `/static/app.js`: the live updates (server-sent events).
pub(crate) const JS: &str = include_str!("../../templates/serve/app.js");

/// The icon served at `/favicon.svg` (and `/favicon.ico`).
pub(crate) const ICON: &str = include_str!("../../templates/serve/favicon.svg");

/// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe as element text and as a quoted
/// attribute's value.
#[must_use]
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A whole page. `title` is text (escaped here); `nav` and `main` are HTML built by
/// [`super::pages`] with every record's text escaped; `live` is the key of the project the
/// page's live updates watch (`*` for every project).
#[must_use]
pub(crate) fn page(title: &str, nav: &str, live: &str, main: &str) -> String {
    SHELL
        .replace("{{title}}", &esc(title))
        .replace("{{live}}", &esc(live))
        .replace("{{nav}}", nav)
        .replace("{{main}}", main)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esc_leaves_no_markup() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(esc("plain · text"), "plain · text");
    }

    #[test]
    fn the_shell_escapes_its_title_and_links_only_its_own_files() {
        let p = page("<b>", "<nav></nav>", "k\"", "<main>x</main>");
        assert!(p.contains("<title>&lt;b&gt; · hank</title>"), "{p}");
        assert!(p.contains(r#"data-live="k&quot;""#));
        assert!(p.contains(r#"<script src="/static/app.js""#));
        assert!(!p.contains("{{"), "every placeholder filled");
        assert!(!p.contains("http"), "nothing from elsewhere");
    }
}
