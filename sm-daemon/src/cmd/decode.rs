//! `ibsm decode`: a MAD dissector for people.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::Value;

/// Arguments of `ibsm decode`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// File holding one MAD as hex (whitespace and line breaks allowed, `#` starts a
    /// comment); standard input when absent.
    file: Option<PathBuf>,
    /// Print one JSON object instead of aligned text.
    #[arg(long)]
    json: bool,
}

/// Reads hex text into bytes; errors name the line and column of the first bad character.
pub(crate) fn parse_hex(text: &str, name: &str) -> anyhow::Result<Vec<u8>> {
    let mut nibbles = Vec::with_capacity(text.len());
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for (col, c) in line.char_indices() {
            match c.to_digit(16) {
                Some(d) => nibbles.push(d as u8),
                None if c.is_whitespace() || c == ':' => {}
                None => bail!("{name}:{}:{}: '{c}' is not a hex digit", ln + 1, col + 1),
            }
        }
    }
    if nibbles.len() % 2 != 0 {
        bail!("{name}: odd number of hex digits ({})", nibbles.len());
    }
    Ok(nibbles.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}

/// Strips a umad header (64 or 56 bytes) when the buffer is one MAD behind it, as the
/// diags' "send buf" dumps are.
fn strip_umad_header(bytes: &[u8]) -> (&[u8], Option<usize>) {
    for h in [64usize, 56] {
        if bytes.len() == h + 256 && bytes[0] != 1 && bytes[h] == 1 {
            return (&bytes[h..], Some(h));
        }
    }
    (bytes, None)
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let (text, name) = match &args.file {
        Some(p) => (
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            p.display().to_string(),
        ),
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading standard input")?;
            (s, "<stdin>".to_string())
        }
    };
    let bytes = parse_hex(&text, &name)?;
    let (mad, stripped) = strip_umad_header(&bytes);
    let mut decoded = sm_mad::decode::decode(mad).with_context(|| format!("{name}: not a MAD"))?;
    if let Some(h) = stripped {
        decoded
            .notes
            .insert(0, format!("skipped a {h}-byte umad header before the MAD"));
    }
    let value = serde_json::to_value(&decoded)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", render(&value));
    }
    Ok(())
}

/// Aligned text: one section per top-level part, `field  value` lines under it.
pub(crate) fn render(v: &Value) -> String {
    let mut out = String::new();
    let Value::Object(top) = v else {
        return format!("{v}\n");
    };
    let title = |k: &str| match k {
        "mad" => "MAD header".to_string(),
        "smp" => "SMP".to_string(),
        "sa" => "SA header".to_string(),
        other => other.to_string(),
    };
    for (k, val) in top {
        match (k.as_str(), val) {
            ("attribute_name", Value::String(s)) => {
                out.push_str(&format!("\n{:<22}{s}\n", "attribute"))
            }
            ("attr_mod_meaning", Value::String(s)) => {
                out.push_str(&format!("{:<22}{s}\n", "attribute modifier"))
            }
            ("records", Value::Array(recs)) => {
                for (i, r) in recs.iter().enumerate() {
                    let name = r
                        .get("attribute")
                        .and_then(Value::as_str)
                        .unwrap_or("record");
                    if recs.len() > 1 {
                        out.push_str(&format!("\n{name} [{i}]\n"));
                    } else {
                        out.push_str(&format!("\n{name}\n"));
                    }
                    fields(&mut out, r, 1, &["attribute"]);
                }
            }
            ("notes", Value::Array(notes)) => {
                out.push('\n');
                for n in notes {
                    out.push_str(&format!("note: {}\n", n.as_str().unwrap_or_default()));
                }
            }
            (_, Value::Object(_)) => {
                out.push_str(&format!("\n{}\n", title(k)));
                fields(&mut out, val, 1, &[]);
            }
            (_, Value::Null) => {}
            _ => out.push_str(&format!("{k:<22}{}\n", scalar(val))),
        }
    }
    out
}

fn scalar(v: &Value) -> String {
    scalar_named("", v)
}

/// Masks read best in hex.
fn scalar_named(key: &str, v: &Value) -> String {
    match v {
        Value::Number(n) if key.contains("mask") || key == "attr_id" => match n.as_u64() {
            Some(x) => format!("{x:#x}"),
            None => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            a.iter().map(scalar).collect::<Vec<_>>().join(" ")
        }
        other => other.to_string(),
    }
}

fn fields(out: &mut String, v: &Value, depth: usize, skip: &[&str]) {
    let pad = "  ".repeat(depth);
    match v {
        Value::Object(m) => {
            let width = m.keys().map(|k| k.len()).max().unwrap_or(0).max(20);
            for (k, val) in m {
                if skip.contains(&k.as_str()) || val.is_null() {
                    continue;
                }
                match val {
                    Value::Object(_) => {
                        out.push_str(&format!("{pad}{k}\n"));
                        fields(out, val, depth + 1, &[]);
                    }
                    Value::Array(a) if a.iter().any(|x| x.is_object()) => {
                        for (i, x) in a.iter().enumerate() {
                            out.push_str(&format!("{pad}{k}[{i}]\n"));
                            fields(out, x, depth + 1, &[]);
                        }
                    }
                    _ => out.push_str(&format!("{pad}{k:<width$}  {}\n", scalar_named(k, val))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_comments_and_errors() {
        assert_eq!(
            parse_hex("# x\n01 81\n0a:0B # y\n", "t").unwrap(),
            vec![1, 0x81, 0x0a, 0x0b]
        );
        let e = parse_hex("0101\n01zz\n", "f.mad").unwrap_err().to_string();
        assert_eq!(e, "f.mad:2:3: 'z' is not a hex digit");
        assert!(parse_hex("012", "t").is_err());
    }

    #[test]
    fn umad_header_is_stripped_only_when_it_fits() {
        let mut b = vec![0u8; 320];
        b[64] = 1;
        assert_eq!(strip_umad_header(&b).1, Some(64));
        let b = vec![1u8; 256];
        assert_eq!(strip_umad_header(&b).1, None);
    }
}
