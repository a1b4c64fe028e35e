//! deb822 control paragraphs (Packages, Release, status, `.sources`, a .deb's `control`).
//!
//! Borrowing parser: field values are slices of the input, continuation lines included.
//! Must never allocate per field; callers parse the values they need.

/// One paragraph: `Field: value` pairs in file order.
#[derive(Debug, Default, Clone)]
pub struct Paragraph<'a> {
    fields: Vec<(&'a str, &'a str)>,
    /// The paragraph's raw text, without the blank line that ends it.
    pub raw: &'a str,
}

impl<'a> Paragraph<'a> {
    /// The value of `name` (case-insensitive), trimmed.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }
}

/// Iterate over the paragraphs of `text`. Comment lines (`#`) are skipped; a line that is
/// neither a field nor a continuation is reported as `Err(line number)`.
pub fn paragraphs(text: &str) -> Paragraphs<'_> {
    Paragraphs { text, pos: 0 }
}

pub struct Paragraphs<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Paragraphs<'a> {
    type Item = Result<Paragraph<'a>, usize>;

    fn next(&mut self) -> Option<Self::Item> {
        let text = self.text;
        let mut para = Paragraph::default();
        let mut start = None;
        let mut end = self.pos;
        let mut current: Option<(&'a str, usize)> = None;
        while self.pos < text.len() {
            let line_end = text[self.pos..]
                .find('\n')
                .map_or(text.len(), |i| self.pos + i);
            let line = text[self.pos..line_end].trim_end_matches('\r');
            let line_start = self.pos;
            self.pos = (line_end + 1).min(text.len());
            if line_end == text.len() {
                self.pos = text.len();
            }
            if line.trim().is_empty() {
                if start.is_some() {
                    break;
                }
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            if line.starts_with([' ', '\t']) {
                if current.is_none() {
                    return Some(Err(line_number(text, line_start)));
                }
                end = line_end;
                continue;
            }
            let Some(colon) = line.find(':') else {
                return Some(Err(line_number(text, line_start)));
            };
            if let Some((k, vstart)) = current.take() {
                para.fields.push((k, &text[vstart..end]));
            }
            start.get_or_insert(line_start);
            current = Some((&line[..colon], line_start + colon + 1));
            end = line_end;
        }
        let start = start?;
        if let Some((k, vstart)) = current {
            para.fields.push((k, &text[vstart..end.max(vstart)]));
        }
        para.raw = &text[start..end];
        Some(Ok(para))
    }
}

fn line_number(text: &str, offset: usize) -> usize {
    text[..offset].bytes().filter(|&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_continuations() {
        let text = "# c\nPackage: a\nDepends: b,\n c\n\n\nPackage: d\r\nVersion: 1\n";
        let ps: Vec<_> = paragraphs(text).collect::<Result<_, _>>().unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].get("depends"), Some("b,\n c"));
        assert_eq!(ps[0].raw, "Package: a\nDepends: b,\n c");
        assert_eq!(ps[1].get("Version"), Some("1"));
        assert_eq!(
            paragraphs("Package: a\nbogus\n")
                .next()
                .unwrap()
                .unwrap_err(),
            2
        );
    }
}
