//! JavaScript `Date` semantics the wire depends on: `toISOString()` rendering and the
//! ISO-8601 subset of `new Date(string)` that the codec revives.
//!
//! Times are epoch milliseconds (`i64`). A JavaScript Date is valid within
//! ±8.64e15 ms; outside that range (or for unparseable text) it is invalid.
//!
//! Knows nothing of storage or of the other value types.

/// The largest absolute epoch-millisecond value a JavaScript Date can hold.
pub const MAX_DATE_MS: i64 = 8_640_000_000_000_000;

/// Keys whose plain string values the decoder revives as Dates (wire.md §6, rule 3).
pub const DATE_KEYS: [&str; 5] = ["createdAt", "updatedAt", "startedAt", "completedAt", "retryAfter"];

/// Days since 1970-01-01 of a proleptic Gregorian civil date (month 1..=12).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`]: (year, month 1..=12, day 1..=31).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `Date.prototype.toISOString()`: `YYYY-MM-DDTHH:mm:ss.sssZ`, with a signed six-digit
/// year outside 0..=9999. Returns `None` for an invalid Date (JavaScript throws
/// `RangeError: Invalid time value`).
pub fn to_iso(ms: i64) -> Option<String> {
    if !(-MAX_DATE_MS..=MAX_DATE_MS).contains(&ms) {
        return None;
    }
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    // Digits written directly (no `format!`): a record's dates are rendered on every
    // write and answer, and the formatting machinery cost a tenth of a step event's core
    // (`cargo run --release --example core_bench`).
    let mut out = String::with_capacity(27);
    if (0..=9999).contains(&y) {
        push_digits(&mut out, y, 4);
    } else {
        out.push(if y < 0 { '-' } else { '+' });
        push_digits(&mut out, y.abs(), 6);
    }
    for (sep, value, width) in
        [('-', mo, 2), ('-', d, 2), ('T', rem / 3_600_000, 2), (':', rem / 60_000 % 60, 2), (':', rem / 1000 % 60, 2), ('.', rem % 1000, 3)]
    {
        out.push(sep);
        push_digits(&mut out, value, width);
    }
    out.push('Z');
    Some(out)
}

/// The `width` low decimal digits of `value` (0 ≤ value < 10^width), zero-padded.
fn push_digits(out: &mut String, value: i64, width: u32) {
    let mut div = 10i64.pow(width - 1);
    while div > 0 {
        out.push(char::from(b'0' + (value / div % 10) as u8));
        div /= 10;
    }
}

/// `to_iso` for values known to be valid (clock readings); falls back to the epoch text
/// rather than panicking.
pub fn iso(ms: i64) -> String {
    to_iso(ms).unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_string())
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let s = self.b.get(self.i..self.i + n)?;
        let mut v = 0i64;
        for c in s {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        self.i += n;
        Some(v)
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
}

/// Parse the ISO-8601 forms V8's `new Date(string)` accepts: `YYYY`, `YYYY-MM`,
/// `YYYY-MM-DD`, `±YYYYYY` years, then optionally `T` (or a space) `HH:mm[:ss[.fff…]]`
/// and `Z`/`z`/`±HH:mm`. Like V8, a day of 1..=31 overflows into the next month and
/// `24:00` is accepted. Date-only forms are UTC; a time without offset is local time,
/// which on Workers is UTC. Non-ISO "legacy" formats (`Jan 2 2020`) are not accepted.
pub fn parse_date(text: &str) -> Option<i64> {
    let mut c = Cursor { b: text.as_bytes(), i: 0 };
    let year = match c.peek()? {
        b'+' | b'-' => {
            let neg = c.eat(b'-');
            if !neg {
                c.eat(b'+');
            }
            let y = c.digits(6)?;
            if neg && y == 0 {
                return None;
            }
            if neg {
                -y
            } else {
                y
            }
        }
        _ => c.digits(4)?,
    };
    let (mut month, mut day) = (1, 1);
    if c.eat(b'-') {
        month = c.digits(2)?;
        if c.eat(b'-') {
            day = c.digits(2)?;
        }
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (mut h, mut mi, mut s, mut ms) = (0, 0, 0, 0);
    let mut offset_min = 0i64;
    if c.eat(b'T') || c.eat(b't') || c.eat(b' ') {
        h = c.digits(2)?;
        if !c.eat(b':') {
            return None;
        }
        mi = c.digits(2)?;
        if c.eat(b':') {
            s = c.digits(2)?;
            if c.eat(b'.') {
                // V8's reading of the fraction (DateParser's ReadMilliseconds): the value
                // of at most 9 significant digits (leading zeros skipped), then scaled by
                // the numeral's length capped at 9 — so past 9 digits a leading zero is
                // lost (`.0555555555` is 555 ms, not 55), as `new Date` reads it.
                let start = c.i;
                let mut value = 0i64;
                let mut significant = 0usize;
                while let Some(d) = c.peek().filter(u8::is_ascii_digit) {
                    if (significant > 0 || d != b'0') && significant < 9 {
                        value = value * 10 + i64::from(d - b'0');
                        significant += 1;
                    }
                    c.i += 1;
                }
                let n = c.i - start;
                if n == 0 {
                    return None;
                }
                ms = match n {
                    1 => value * 100,
                    2 => value * 10,
                    3 => value,
                    _ => value / 10i64.pow(u32::try_from(n.min(9) - 3).unwrap_or(6)),
                };
            }
        }
        if h > 24 || mi > 59 || s > 59 || (h == 24 && (mi | s | ms) != 0) {
            return None;
        }
        match c.peek() {
            Some(b'Z') | Some(b'z') => c.i += 1,
            Some(sign @ (b'+' | b'-')) => {
                c.i += 1;
                let oh = c.digits(2)?;
                if !c.eat(b':') {
                    return None;
                }
                let om = c.digits(2)?;
                if oh > 23 || om > 59 {
                    return None;
                }
                offset_min = if sign == b'+' { oh * 60 + om } else { -(oh * 60 + om) };
            }
            _ => {}
        }
    }
    if !c.done() {
        return None;
    }
    let days = days_from_civil(year, month, 1) + day - 1;
    let total = days.checked_mul(86_400_000)?.checked_add(h * 3_600_000 + mi * 60_000 + s * 1000 + ms - offset_min * 60_000)?;
    (-MAX_DATE_MS..=MAX_DATE_MS).contains(&total).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_to_iso_string() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_767_323_045_678), "2026-01-02T03:04:05.678Z");
        assert_eq!(iso(946_684_800_000), "2000-01-01T00:00:00.000Z");
        assert_eq!(to_iso(MAX_DATE_MS).unwrap(), "+275760-09-13T00:00:00.000Z");
        assert_eq!(to_iso(-62_198_755_200_000).unwrap(), "-000001-01-01T00:00:00.000Z");
        assert_eq!(to_iso(-1).unwrap(), "1969-12-31T23:59:59.999Z");
        assert_eq!(to_iso(MAX_DATE_MS + 1), None);
    }

    /// The `format!` rendering `to_iso` had before it wrote its digits itself.
    fn formatted(ms: i64) -> String {
        let days = ms.div_euclid(86_400_000);
        let rem = ms.rem_euclid(86_400_000);
        let (y, mo, d) = civil_from_days(days);
        let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
        let year = if (0..=9999).contains(&y) {
            format!("{y:04}")
        } else if y < 0 {
            format!("-{:06}", -y)
        } else {
            format!("+{y:06}")
        };
        format!("{year}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
    }

    #[test]
    fn renders_as_formatting_did() {
        let mut ms = -MAX_DATE_MS;
        // A stride that is no multiple of a second, minute or day walks every field.
        while ms <= MAX_DATE_MS {
            assert_eq!(to_iso(ms).unwrap(), formatted(ms), "{ms}");
            ms += 86_400_000_000_000 + 3_661_001;
        }
        for ms in [-MAX_DATE_MS, MAX_DATE_MS, -62_167_219_200_001, -62_167_219_200_000, 253_402_300_799_999, 253_402_300_800_000, -1, 0, 1]
        {
            assert_eq!(to_iso(ms).unwrap(), formatted(ms), "{ms}");
        }
    }

    #[test]
    fn fractions_are_read_like_v8() {
        // Node 20's `new Date("2099-01-01T00:00:00.<f>Z").getUTCMilliseconds()`.
        let ms = |f: &str| parse_date(&format!("2099-01-01T00:00:00.{f}Z")).map(|t| t.rem_euclid(1000));
        for (f, want) in [
            ("5", 500),
            ("05", 50),
            ("055", 55),
            ("0555", 55),
            ("055555555", 55),
            ("0555555555", 555),
            ("05555555555555", 555),
            ("123456789", 123),
            ("1234567890", 123),
            ("0012345678", 12),
            ("00123456789", 123),
            ("99999999999", 999),
            ("0000000001", 0),
        ] {
            assert_eq!(ms(f), Some(want), ".{f}");
        }
        let long = format!("2099-01-01T00:00:00.0{}Z", "5".repeat(390));
        assert_eq!(parse_date(&long).map(|t| t.rem_euclid(1000)), Some(555));
    }

    #[test]
    fn parses_v8_iso_forms() {
        let p = |s| parse_date(s).and_then(to_iso);
        assert_eq!(p("2026-01-02T03:04:05.678Z").unwrap(), "2026-01-02T03:04:05.678Z");
        assert_eq!(p("2020-02-30").unwrap(), "2020-03-01T00:00:00.000Z");
        assert_eq!(p("2020-01-01T24:00:00Z").unwrap(), "2020-01-02T00:00:00.000Z");
        assert_eq!(p("2020-01-01T00:00:00.1234567Z").unwrap(), "2020-01-01T00:00:00.123Z");
        assert_eq!(p("2020-01-01T00:00Z").unwrap(), "2020-01-01T00:00:00.000Z");
        assert_eq!(p("2020").unwrap(), "2020-01-01T00:00:00.000Z");
        assert_eq!(p("+002020-01-01T00:00:00Z").unwrap(), "2020-01-01T00:00:00.000Z");
        assert_eq!(p("2020-01-01T00:00:00+01:00").unwrap(), "2019-12-31T23:00:00.000Z");
        assert_eq!(p("2020-01-01 00:00:00").unwrap(), "2020-01-01T00:00:00.000Z");
        for bad in ["2020-13-01", "-000000-01-01T00:00:00Z", "  2020-01-01T00:00:00Z", "hello", "2020-01-01T00:00:60Z", "", "2020-01-01T"] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn civil_roundtrip() {
        for d in [-800_000i64, -1, 0, 1, 59, 365, 10_957, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
