//! NodeDescription (IBA 14.2.5.2): 64 bytes of UTF-8 text, NUL padded.

use crate::bits::wire_via_inherent;
use crate::{Error, Result, SmpAttribute};

/// Length on the wire.
pub const LEN: usize = 64;

/// NodeDescription. Keeps all 64 bytes so that parse -> emit is exact.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    /// The raw text bytes.
    pub text: [u8; LEN],
}

impl Default for Repr {
    fn default() -> Self {
        Repr { text: [0; LEN] }
    }
}

impl Repr {
    /// A description from a string, cut to 64 bytes at a character boundary.
    pub fn new(s: &str) -> Repr {
        let mut text = [0u8; LEN];
        let mut end = s.len().min(LEN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].copy_from_slice(&s.as_bytes()[..end]);
        Repr { text }
    }

    /// The text up to the first NUL, with invalid UTF-8 replaced.
    pub fn as_string(&self) -> String {
        let end = self.text.iter().position(|&b| b == 0).unwrap_or(LEN);
        String::from_utf8_lossy(&self.text[..end]).into_owned()
    }

    /// Parses the description.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::Truncated {
                what: "NodeDescription",
                need: LEN,
                got,
            });
        }
        let mut text = [0u8; LEN];
        text.copy_from_slice(&buf[..LEN]);
        Ok(Repr { text })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the description.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "NodeDescription",
                need: LEN,
                got,
            });
        }
        buf[..LEN].copy_from_slice(&self.text);
        Ok(())
    }
}

impl core::fmt::Debug for Repr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "NodeDescription({:?})", self.as_string())
    }
}

impl serde::Serialize for Repr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("NodeDescription", 1)?;
        st.serialize_field("node_string", &self.as_string())?;
        st.end()
    }
}

wire_via_inherent!("NodeDescription", LEN);

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::NODE_DESCRIPTION;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_text() {
        let mut buf = [0u8; 64];
        buf[..7].copy_from_slice(b"Switch1");
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.as_string(), "Switch1");
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary() {
        let s = "é".repeat(40);
        let r = Repr::new(&s);
        assert_eq!(r.as_string().len(), 64);
        let s = format!("a{}", "é".repeat(40));
        assert_eq!(Repr::new(&s).as_string().len(), 63);
    }
}
