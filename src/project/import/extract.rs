//! The deterministic conversion (`--no-ai`): sections, checkbox and numbered items,
//! requirement sentences → fix_plan tasks, and the files it renders.  **\[pure\]**

use super::*;

pub(super) static HEADING: LazyLock<Regex> =
    LazyLock::new(|| analysis::re(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$"));
pub(super) static LIST_ITEM: LazyLock<Regex> =
    LazyLock::new(|| analysis::re(r"^(?:([-*+])|\d{1,3}[.)])\s+(.*)$"));
pub(super) static CHECKBOX: LazyLock<Regex> = LazyLock::new(|| analysis::re(r"^\[[ xX]\]\s+"));
pub(super) static REQUIREMENT_WORD: LazyLock<Regex> = LazyLock::new(|| {
    analysis::re(r"(?i)\b(must|shall|should|muss|müssen|soll|sollen|sollte|sollten)\b")
});
/// Japanese requirement forms (no word boundaries in Japanese text).
pub(super) const REQUIREMENT_JA: [&str; 5] =
    ["必要がある", "必要です", "しなければ", "ものとする", "必須"];

/// Splits Markdown into sections at headings (outside fenced code). Each section is its
/// heading's text (`None` before the first heading) and its lines, heading line included.
pub(super) fn split_sections(text: &str) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let mut current: (Option<String>, String) = (None, String::new());
    let mut fence = tasks::Fence::default();
    for line in text.lines() {
        if !fence.code(line)
            && let Some(caps) = HEADING.captures(line)
        {
            let title = tasks::clean_title(caps.get(1).map_or("", |m| m.as_str()));
            if current.0.is_some() || !current.1.trim().is_empty() {
                out.push(std::mem::take(&mut current));
            }
            current = (Some(title), String::new());
        }
        current.1.push_str(line);
        current.1.push('\n');
    }
    if current.0.is_some() || !current.1.trim().is_empty() {
        out.push(current);
    }
    out
}

/// Lowercased, trailing punctuation removed: two tasks with the same key are the same task.
/// Emphasis and code marks (`*`, `` ` ``) do not make another task.
pub(super) fn task_key(title: &str) -> String {
    let plain: String = title.chars().filter(|c| !matches!(c, '*' | '`')).collect();
    plain
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '。', ':', '：', '!', '！'])
        .trim()
        .to_lowercase()
}

/// The words of a title that carry its meaning: lower case, letters and digits only, at least
/// three characters, a plural `s` dropped, a few filler words left out (pure).
fn content_words(title: &str) -> Vec<String> {
    const FILLER: &[&str] = &[
        "the", "and", "for", "with", "must", "should", "shall", "will", "can", "that", "this",
        "from", "into", "are", "has", "have", "its", "our", "all",
    ];
    title
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !FILLER.contains(&w.as_str()))
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.chars().count() >= 3 => stem.to_string(),
            _ => w,
        })
        .collect()
}

/// A requirement sentence as a task title: bold marks removed, a sentence wrapped whole in
/// emphasis (`*…*`, `_…_`) unwrapped, the final full stop dropped.
fn sentence_title(sentence: &str) -> String {
    let mut t = sentence.trim().replace("**", "");
    for mark in ['*', '_'] {
        if t.len() > 2 && t.starts_with(mark) && t.ends_with(mark) {
            t = t[1..t.len() - 1].to_string();
        }
    }
    tasks::clean_title(t.trim().trim_end_matches(['.', '。']).trim())
}

/// Splits prose into sentences after `.`, `!`, `?` followed by a space (or the end), and
/// after the CJK full stops.
pub(super) fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = i + c.len_utf8();
        let cut = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|(_, n)| n.is_whitespace()),
            _ => false,
        };
        if cut {
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// A sentence that states a requirement (not a question).  **\[pure\]**
#[must_use]
pub(crate) fn is_requirement(sentence: &str) -> bool {
    let s = sentence.trim();
    if s.ends_with('?') || s.ends_with('？') {
        return false;
    }
    REQUIREMENT_WORD.is_match(s) || REQUIREMENT_JA.iter().any(|w| s.contains(w))
}

/// The requirement sentences of a section's prose and plain bullets. Checkbox and numbered
/// items are left to [`tasks::extract_prd_tasks`]; bullets whose key is in `taken` were
/// already extracted whole.
pub(super) fn requirement_sentences(section: &str, taken: &HashSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut para = String::new();
    let flush = |para: &mut String, out: &mut Vec<String>| {
        for s in split_sentences(para) {
            if is_requirement(s) {
                out.push(s.to_string());
            }
        }
        para.clear();
    };
    let mut fence = tasks::Fence::default();
    for line in section.lines() {
        if fence.code(line) {
            // The paragraph before the block ends (inside it nothing is added).
            flush(&mut para, &mut out);
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('|') || HEADING.is_match(line) {
            flush(&mut para, &mut out);
            continue;
        }
        let trimmed = trimmed.trim_start_matches('>').trim();
        if let Some(caps) = LIST_ITEM.captures(trimmed) {
            flush(&mut para, &mut out);
            let item = caps.get(2).map_or("", |m| m.as_str());
            let numbered = caps.get(1).is_none();
            if numbered || CHECKBOX.is_match(item) || taken.contains(&task_key(item)) {
                continue;
            }
            para.push_str(item);
            flush(&mut para, &mut out);
            continue;
        }
        if !para.is_empty() {
            para.push(' ');
        }
        para.push_str(trimmed);
    }
    flush(&mut para, &mut out);
    out
}

/// Tasks of a document, grouped by section, deduplicated and capped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Extraction {
    /// Section title and its tasks, in document order (requirement sentences last, under
    /// `Requirements`); no empty section.
    pub sections: Vec<(String, Vec<Task>)>,
    /// Distinct tasks found.
    pub found: usize,
    /// Tasks dropped over the cap.
    pub dropped: usize,
}

impl Extraction {
    /// Tasks kept.
    #[must_use]
    pub(crate) fn kept(&self) -> usize {
        self.found - self.dropped
    }
}

pub(super) fn push_section(sections: &mut Vec<(String, Vec<Task>)>, title: &str, tasks: Vec<Task>) {
    if tasks.is_empty() {
        return;
    }
    match sections
        .iter_mut()
        .find(|(t, _)| t.eq_ignore_ascii_case(title))
    {
        Some((_, existing)) => existing.extend(tasks),
        None => sections.push((title.to_string(), tasks)),
    }
}

/// Sections that list what is *not* to be done: no tasks come from them.
pub(super) fn is_excluded_section(title: &str) -> bool {
    let t = title.to_lowercase();
    [
        "out of scope",
        "not in scope",
        "non-goal",
        "non goal",
        "nicht im umfang",
        "対象外",
    ]
    .iter()
    .any(|k| t.contains(k))
}

/// Extracts the tasks of a Markdown or text document (see the module docs).  **\[pure\]**
#[must_use]
pub(crate) fn extract_tasks(text: &str, cap: usize) -> Extraction {
    let mut seen: HashSet<String> = HashSet::new();
    let mut sections: Vec<(String, Vec<Task>)> = Vec::new();
    let mut requirements: Vec<Task> = Vec::new();
    for (title, body) in split_sections(text) {
        if title.as_deref().is_some_and(is_excluded_section) {
            continue;
        }
        let listed = tasks::extract_prd_tasks(&body, usize::MAX);
        let taken: HashSet<String> = listed.iter().map(|t| task_key(&t.title)).collect();
        let kept: Vec<Task> = listed
            .into_iter()
            .filter(|t| seen.insert(task_key(&t.title)))
            .collect();
        let title = title.filter(|t| !t.is_empty());
        push_section(&mut sections, title.as_deref().unwrap_or("Tasks"), kept);
        for sentence in requirement_sentences(&body, &taken) {
            let title = sentence_title(&sentence);
            if title.chars().count() >= 3 && seen.insert(task_key(&title)) {
                requirements.push(Task {
                    title,
                    origin: TaskOrigin::Prd,
                });
            }
        }
    }
    // A requirement sentence that restates a listed task ("The calculator must add two
    // numbers" beside "- [ ] Add two numbers") is the same work: not a second task.
    let listed: Vec<Vec<String>> = sections
        .iter()
        .flat_map(|(_, t)| t.iter().map(|t| content_words(&t.title)))
        .filter(|w| w.len() >= 2)
        .collect();
    requirements.retain(|r| {
        let words = content_words(&r.title);
        !listed.iter().any(|l| l.iter().all(|w| words.contains(w)))
    });
    push_section(&mut sections, "Requirements", requirements);
    let found: usize = sections.iter().map(|(_, t)| t.len()).sum();
    let mut budget = cap;
    for (_, list) in &mut sections {
        list.truncate(budget);
        budget -= list.len();
    }
    sections.retain(|(_, t)| !t.is_empty());
    Extraction {
        sections,
        found,
        dropped: found.saturating_sub(cap),
    }
}

/// Makes a file name safe inside backticks and an HTML comment.
pub(super) fn display_name(name: &str) -> String {
    tasks::clean_title(name)
        .replace('`', "'")
        .replace("--", "-")
}

/// The deterministic `fix_plan.md`.  **\[pure\]**
#[must_use]
pub(crate) fn render_fix_plan(project_name: &str, source_name: &str, ex: &Extraction) -> String {
    let mut out = format!(
        "# Fix plan — {project_name}\n\n\
         Imported from `{}` without AI: one task per checkbox, numbered item or requirement \
         sentence of the document (full text: `.hank/specs/requirements.md`). Reorder by \
         priority; each loop takes the first open item and ticks it (`- [x]`) when it is done.\n",
        display_name(source_name)
    );
    if ex.sections.is_empty() {
        let _ = write!(out, "\n## High priority\n{}\n", tasks::plan_items(&[]));
    }
    for (title, list) in &ex.sections {
        let _ = write!(out, "\n## {title}\n{}\n", tasks::plan_items(list));
    }
    if ex.dropped > 0 {
        let _ = write!(
            out,
            "\n<!-- {} more task(s) were not imported (cap {}); see .hank/specs/requirements.md -->\n",
            ex.dropped,
            ex.kept()
        );
    }
    out
}

/// `specs/requirements.md`: the whole document after a provenance comment (a JSON document
/// as Markdown, followed by its original text in a fence).  **\[pure\]**
#[must_use]
pub(crate) fn render_requirements(doc: &Document) -> String {
    let mut out = format!(
        "<!-- Imported by hank from {} ({}). -->\n\n",
        display_name(&doc.file_name),
        doc.format.label()
    );
    match &doc.json {
        Some(value) => {
            out.push_str(json_to_markdown(value).trim());
            let longest = doc
                .text
                .split(|c| c != '`')
                .map(str::len)
                .max()
                .unwrap_or(0);
            let fence = "`".repeat(longest.max(2) + 1);
            let _ = write!(
                out,
                "\n\n## Original document\n\n{fence}json\n{}\n{fence}\n",
                doc.text.trim_end()
            );
        }
        None => {
            out.push_str(doc.text.trim_end());
            out.push('\n');
        }
    }
    out
}

/// What a conversion produced, ready to install.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Converted {
    pub prompt_md: String,
    pub fix_plan_md: String,
    pub requirements_md: String,
    /// Checkbox items in `fix_plan_md`.
    pub tasks_found: usize,
    /// Tasks dropped over the cap (deterministic only).
    pub tasks_dropped: usize,
    pub warnings: Vec<String>,
}

/// The tasks of a document as the conversion without AI finds them (a JSON document read as
/// its Markdown rendering).  **\[pure\]**
#[must_use]
pub(crate) fn extract_document(doc: &Document, cap: usize) -> Extraction {
    let source = doc
        .json
        .as_ref()
        .map_or_else(|| doc.text.clone(), json_to_markdown);
    extract_tasks(&source, cap)
}

/// The tasks of [`extract_document`] in plan order, sections flattened (what `enable --from
/// prd` imports: the same tasks as `import --no-ai`).  **\[pure\]**
#[must_use]
pub(crate) fn document_tasks(doc: &Document, cap: usize) -> Vec<Task> {
    extract_document(doc, cap)
        .sections
        .into_iter()
        .flat_map(|(_, tasks)| tasks)
        .collect()
}

/// The deterministic conversion. `standard_prompt` is the project's rendered PROMPT.md.
/// **\[pure\]**
#[must_use]
pub(crate) fn convert_deterministic(
    doc: &Document,
    project_name: &str,
    standard_prompt: &str,
    cap: usize,
) -> Converted {
    let ex = extract_document(doc, cap);
    let mut warnings = Vec::new();
    if ex.found == 0 {
        warnings.push(format!(
            "no tasks found in {}: fix_plan.md has a starter item; add the real tasks by hand",
            doc.file_name
        ));
    }
    if ex.dropped > 0 {
        warnings.push(format!(
            "kept the first {} of {} tasks ({} dropped; raise --limit to keep more)",
            ex.kept(),
            ex.found,
            ex.dropped
        ));
    }
    Converted {
        prompt_md: standard_prompt.to_string(),
        fix_plan_md: render_fix_plan(project_name, &doc.file_name, &ex),
        requirements_md: render_requirements(doc),
        tasks_found: ex.kept(),
        tasks_dropped: ex.dropped,
        warnings,
    }
}
