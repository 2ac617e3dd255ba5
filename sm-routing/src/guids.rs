//! GUID list files in OpenSM's format (`root_guid_file`, `cn_guid_file`): one GUID per
//! line, `0x`-prefixed hexadecimal (a bare decimal number is taken too, as `strtoull(.., 0)`
//! would, and the colon-grouped form: every form [`Guid`]'s parser reads), anything after `#`
//! a comment, blank lines ignored. Text after the GUID on a line (OpenSM's node-map files put
//! a value there) is ignored.

use std::path::{Path, PathBuf};

use sm_mad::Guid;

/// Why a GUID file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuidFileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: \"{text}\" is not a GUID (expected e.g. 0x0002c90300001234)", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        text: String,
    },
}

/// Reads a GUID file.
pub fn read_guid_file(path: &Path) -> Result<Vec<Guid>, GuidFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| GuidFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_guids(&text, path)
}

/// Parses the text of a GUID file; `path` only names it in errors.
pub fn parse_guids(text: &str, path: &Path) -> Result<Vec<Guid>, GuidFileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("").trim();
        let Some(word) = body.split_whitespace().next() else {
            continue;
        };
        match word.parse::<Guid>() {
            Ok(g) => out.push(g),
            Err(_) => {
                return Err(GuidFileError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    text: word.to_string(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blank_lines_and_trailing_text() {
        let text = "# roots\n0x0002000300000000\n\n  0x0002000300000001  # core 1\n42 extra\n\
                    0002:0003:0000:0002\n";
        let g = parse_guids(text, Path::new("roots.txt")).unwrap_or_default();
        assert_eq!(
            g,
            vec![
                Guid(0x0002_0003_0000_0000),
                Guid(0x0002_0003_0000_0001),
                Guid(42),
                Guid(0x0002_0003_0000_0002)
            ]
        );
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let err = parse_guids("0x1\n0xzz\n", Path::new("roots.txt")).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("roots.txt:2: \"0xzz\""), "{msg}");
        // A sign is not a digit (`from_str_radix` would have taken it).
        let err = parse_guids("\n\n0x+1\n", Path::new("roots.txt")).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("roots.txt:3: \"0x+1\""), "{msg}");
    }

    #[test]
    fn missing_file_names_it() {
        let err = read_guid_file(Path::new("/nonexistent/roots.txt")).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("/nonexistent/roots.txt: "), "{msg}");
    }
}
