//! Reads one input per stdin line (its bytes in base64), decodes the bytes the way the
//! router and a Durable Object decode a request body ([`decode_utf8`], [`Value::parse`]) and prints one JSON
//! line per input: `{"ok":true,"out":<our encoding as a string>}` or
//! `{"ok":false,"error":…}`. Used by `scripts/codec-diff.mjs` to compare the codec with
//! Node's `JSON.parse`.

use std::io::{BufRead, Write};

use world_celld_rs::wire::base64;
use world_celld_rs::wire::value::{decode_utf8, write_string};
use world_celld_rs::wire::Value;

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        let bytes = base64::decode(line.trim()).expect("each line is base64");
        let mut answer = String::new();
        match Value::parse(&decode_utf8(&bytes)) {
            Ok(value) => {
                let mut encoded = String::new();
                value.write_json_keeping_invalid_dates(&mut encoded);
                answer.push_str("{\"ok\":true,\"out\":");
                write_string(&mut answer, &encoded);
                answer.push('}');
            }
            Err(e) => {
                answer.push_str("{\"ok\":false,\"error\":");
                write_string(&mut answer, &e.0);
                answer.push('}');
            }
        }
        writeln!(out, "{answer}").expect("stdout");
    }
}
