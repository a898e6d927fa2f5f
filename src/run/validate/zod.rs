//! A small re-implementation of the zod 4.3.6 parsing rules used by the
//! `@workflow/world` 5.0.0-beta.27 schemas: the accepted values, the parsed output
//! (unknown members stripped, dates coerced, defaults applied) and the issue list a
//! failed parse reports, rendered exactly like `ZodError.message`
//! (`JSON.stringify(issues, null, 2)`).
//!
//! Only the schema kinds those schemas use exist here. `None` is JavaScript `undefined`.
//!
//! Knows none of our schemas (those are [`super::schemas`]).

use crate::wire::js::{new_date, utf16_len};
use crate::wire::{Map, Value};

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A schema node.
#[derive(Debug, Clone)]
pub enum Schema {
    /// `SerializedDataSchema` (byte array or anything): accepts every value, even absent.
    Any,
    String {
        max: Option<usize>,
    },
    Number {
        int: bool,
        positive: bool,
    },
    Boolean,
    Null,
    Undefined,
    LiteralTrue,
    Literal(&'static str),
    Enum(&'static [&'static str]),
    /// `z.coerce.date()`.
    Date,
    Optional(Box<Schema>),
    /// `.default({})` (the only default in these schemas).
    DefaultEmptyObject(Box<Schema>),
    /// `z.record(z.string(), value)`.
    Record(Box<Schema>),
    Array(Box<Schema>),
    Object(Vec<(&'static str, Schema)>),
    Union(Vec<Schema>),
    DiscriminatedUnion {
        key: &'static str,
        options: Vec<Schema>,
    },
    Intersection(Box<Schema>, Box<Schema>),
}

/// Ordered JSON for rendering issues exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Str(String),
    Num(f64),
    Bool(bool),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

/// One path segment.
#[derive(Debug, Clone, PartialEq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// One zod issue: members in zod's order, with `path` inserted before `message`.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    /// Members before `path`.
    pub head: Vec<(&'static str, J)>,
    pub path: Vec<Seg>,
    pub message: String,
}

impl Issue {
    fn to_j(&self) -> J {
        let mut members = self.head.clone();
        members.push(("path", J::Arr(self.path.iter().map(seg_j).collect())));
        members.push(("message", J::Str(self.message.clone())));
        J::Obj(members)
    }
}

fn seg_j(s: &Seg) -> J {
    match s {
        Seg::Key(k) => J::Str(k.clone()),
        Seg::Index(i) => J::Num(*i as f64),
    }
}

/// `ZodError.message` for a list of issues.
pub fn render(issues: &[Issue]) -> String {
    let mut out = String::new();
    write_pretty(&J::Arr(issues.iter().map(Issue::to_j).collect()), 0, &mut out);
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_pretty(j: &J, level: usize, out: &mut String) {
    match j {
        J::Str(s) => crate::wire::value::write_string(out, s),
        J::Num(n) => out.push_str(&crate::wire::number::number_to_string(*n)),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Arr(items) if items.is_empty() => out.push_str("[]"),
        J::Obj(members) if members.is_empty() => out.push_str("{}"),
        J::Arr(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                write_pretty(item, level + 1, out);
            }
            out.push('\n');
            indent(out, level);
            out.push(']');
        }
        J::Obj(members) => {
            out.push_str("{\n");
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                crate::wire::value::write_string(out, k);
                out.push_str(": ");
                write_pretty(v, level + 1, out);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
    }
}

/// zod's `parsedType` name of a value (for "received …").
pub fn parsed_type(v: Option<&Value>) -> &'static str {
    match v {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(n)) if n.is_nan() => "NaN",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
        Some(Value::Date(_)) => "Date",
        Some(Value::Bytes(_)) => "Uint8Array",
        Some(json @ Value::Json(_)) => parsed_type(Some(&json.decoded())),
    }
}

struct Cx<'p> {
    path: &'p mut Vec<Seg>,
    issues: Vec<Issue>,
}

impl Cx<'_> {
    fn issue(&mut self, head: Vec<(&'static str, J)>, message: String) {
        self.issues.push(Issue { head, path: self.path.clone(), message });
    }
    fn invalid_type(&mut self, expected: &'static str, input: Option<&Value>) {
        let message = format!("Invalid input: expected {expected}, received {}", parsed_type(input));
        self.issue(vec![("expected", J::Str(expected.into())), ("code", J::Str("invalid_type".into()))], message);
    }
}

/// Is this a JavaScript object for zod's `isObject` (not null, not an array)?
fn is_object_like(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Object(_) | Value::Date(_) | Value::Bytes(_)))
}

static EMPTY: std::sync::OnceLock<Map> = std::sync::OnceLock::new();

fn members(v: Option<&Value>) -> &Map {
    match v {
        Some(Value::Object(m)) => m,
        _ => EMPTY.get_or_init(Map::new),
    }
}

impl Schema {
    pub fn opt(self) -> Schema {
        Schema::Optional(Box::new(self))
    }

    /// Parse `input`; `Ok(output)` (`None` = undefined) or the issue list.
    pub fn parse(&self, input: Option<&Value>) -> Result<Option<Value>, Vec<Issue>> {
        let mut path = Vec::new();
        let mut cx = Cx { path: &mut path, issues: Vec::new() };
        let out = self.run(input, &mut cx, 0);
        if cx.issues.is_empty() {
            Ok(out)
        } else {
            Err(cx.issues)
        }
    }

    /// The key whose value selects a discriminated option.
    fn discriminator_accepts(&self, key: &str, v: Option<&Value>) -> bool {
        let Schema::Object(shape) = self else { return false };
        let Some((_, s)) = shape.iter().find(|(k, _)| *k == key) else { return false };
        let Some(Value::String(v)) = v else { return false };
        match s {
            Schema::Literal(l) => l == v,
            Schema::Enum(options) => options.contains(&v.as_str()),
            _ => false,
        }
    }

    fn run(&self, input: Option<&Value>, cx: &mut Cx, depth: usize) -> Option<Value> {
        if depth > 64 {
            cx.invalid_type("object", input);
            return None;
        }
        match self {
            Schema::Any => input.cloned(),
            Schema::String { max } => match input {
                Some(Value::String(s)) => {
                    if let Some(max) = max {
                        if utf16_len(s) > *max {
                            cx.issue(
                                vec![
                                    ("origin", J::Str("string".into())),
                                    ("code", J::Str("too_big".into())),
                                    ("maximum", J::Num(*max as f64)),
                                    ("inclusive", J::Bool(true)),
                                ],
                                format!("Too big: expected string to have <={max} characters"),
                            );
                        }
                    }
                    input.cloned()
                }
                _ => {
                    cx.invalid_type("string", input);
                    None
                }
            },
            Schema::Number { int, positive } => match input {
                Some(Value::Number(n)) if n.is_finite() => {
                    let n = *n;
                    if *int {
                        if n.trunc() != n {
                            cx.issue(
                                vec![
                                    ("expected", J::Str("int".into())),
                                    ("format", J::Str("safeint".into())),
                                    ("code", J::Str("invalid_type".into())),
                                ],
                                "Invalid input: expected int, received number".into(),
                            );
                            return None;
                        }
                        if n > MAX_SAFE_INTEGER {
                            cx.issue(
                                vec![
                                    ("code", J::Str("too_big".into())),
                                    ("maximum", J::Num(MAX_SAFE_INTEGER)),
                                    ("note", J::Str("Integers must be within the safe integer range.".into())),
                                    ("origin", J::Str("int".into())),
                                    ("inclusive", J::Bool(true)),
                                ],
                                "Too big: expected int to be <=9007199254740991".into(),
                            );
                        }
                        if n < -MAX_SAFE_INTEGER {
                            cx.issue(
                                vec![
                                    ("code", J::Str("too_small".into())),
                                    ("minimum", J::Num(-MAX_SAFE_INTEGER)),
                                    ("note", J::Str("Integers must be within the safe integer range.".into())),
                                    ("origin", J::Str("int".into())),
                                    ("inclusive", J::Bool(true)),
                                ],
                                "Too small: expected int to be >=-9007199254740991".into(),
                            );
                        }
                    }
                    if *positive && n <= 0.0 {
                        cx.issue(
                            vec![
                                ("origin", J::Str("number".into())),
                                ("code", J::Str("too_small".into())),
                                ("minimum", J::Num(0.0)),
                                ("inclusive", J::Bool(false)),
                            ],
                            "Too small: expected number to be >0".into(),
                        );
                    }
                    input.cloned()
                }
                _ => {
                    cx.invalid_type("number", input);
                    None
                }
            },
            Schema::Boolean => match input {
                Some(Value::Bool(_)) => input.cloned(),
                _ => {
                    cx.invalid_type("boolean", input);
                    None
                }
            },
            Schema::Null => match input {
                Some(Value::Null) => input.cloned(),
                _ => {
                    cx.invalid_type("null", input);
                    None
                }
            },
            Schema::Undefined => {
                if input.is_some() {
                    cx.invalid_type("undefined", input);
                }
                None
            }
            Schema::LiteralTrue => {
                if input != Some(&Value::Bool(true)) {
                    cx.issue(
                        vec![("code", J::Str("invalid_value".into())), ("values", J::Arr(vec![J::Bool(true)]))],
                        "Invalid input: expected true".into(),
                    );
                }
                input.cloned()
            }
            Schema::Literal(l) => {
                if input.and_then(Value::as_str) != Some(*l) {
                    cx.issue(
                        vec![("code", J::Str("invalid_value".into())), ("values", J::Arr(vec![J::Str((*l).into())]))],
                        format!("Invalid input: expected {}", crate::wire::value::json_string(l)),
                    );
                }
                input.cloned()
            }
            Schema::Enum(options) => {
                if !input.and_then(Value::as_str).is_some_and(|s| options.contains(&s)) {
                    let list = options.iter().map(|o| crate::wire::value::json_string(o)).collect::<Vec<_>>().join("|");
                    cx.issue(
                        vec![
                            ("code", J::Str("invalid_value".into())),
                            ("values", J::Arr(options.iter().map(|o| J::Str((*o).into())).collect())),
                        ],
                        format!("Invalid option: expected one of {list}"),
                    );
                }
                input.cloned()
            }
            Schema::Date => match new_date(input) {
                Some(ms) => Some(Value::Date(Some(ms))),
                None => {
                    cx.issue(
                        vec![
                            ("expected", J::Str("date".into())),
                            ("code", J::Str("invalid_type".into())),
                            ("received", J::Str("Invalid Date".into())),
                        ],
                        "Invalid input: expected date, received Date".into(),
                    );
                    None
                }
            },
            Schema::Optional(inner) => match input {
                None => None,
                Some(_) => inner.run(input, cx, depth + 1),
            },
            Schema::DefaultEmptyObject(inner) => match input {
                None => Some(Value::Object(Map::new())),
                Some(_) => inner.run(input, cx, depth + 1),
            },
            Schema::Record(value_schema) => match input {
                Some(Value::Object(map)) => {
                    let mut out = Map::new();
                    for k in crate::wire::js::own_keys(map) {
                        cx.path.push(Seg::Key(k.clone()));
                        let v = value_schema.run(map.get(k.as_str()), cx, depth + 1);
                        cx.path.pop();
                        if let Some(v) = v {
                            out.insert(k.clone(), v);
                        }
                    }
                    Some(Value::Object(out))
                }
                _ => {
                    cx.invalid_type("record", input);
                    None
                }
            },
            Schema::Array(item) => match input {
                Some(Value::Array(items)) => {
                    let mut out = Vec::with_capacity(items.len());
                    for (i, v) in items.iter().enumerate() {
                        cx.path.push(Seg::Index(i));
                        let parsed = item.run(Some(v), cx, depth + 1);
                        cx.path.pop();
                        out.push(parsed.unwrap_or(Value::Null));
                    }
                    Some(Value::Array(out))
                }
                _ => {
                    cx.invalid_type("array", input);
                    None
                }
            },
            Schema::Object(shape) => {
                if !is_object_like(input) {
                    cx.invalid_type("object", input);
                    return None;
                }
                let map = members(input);
                let mut out = Map::new();
                for (k, s) in shape {
                    cx.path.push(Seg::Key((*k).to_string()));
                    let v = s.run(map.get(*k), cx, depth + 1);
                    cx.path.pop();
                    if let Some(v) = v {
                        out.insert((*k).to_string(), v);
                    }
                }
                Some(Value::Object(out))
            }
            Schema::Union(options) => {
                let mut all = Vec::new();
                for o in options {
                    let mut sub_path = Vec::new();
                    let mut sub = Cx { path: &mut sub_path, issues: Vec::new() };
                    let out = o.run(input, &mut sub, depth + 1);
                    if sub.issues.is_empty() {
                        return out;
                    }
                    all.push(J::Arr(sub.issues.iter().map(Issue::to_j).collect()));
                }
                cx.issue(vec![("code", J::Str("invalid_union".into())), ("errors", J::Arr(all))], "Invalid input".into());
                None
            }
            Schema::DiscriminatedUnion { key, options } => {
                if !is_object_like(input) {
                    let message = format!("Invalid input: expected object, received {}", parsed_type(input));
                    cx.issue(vec![("code", J::Str("invalid_type".into())), ("expected", J::Str("object".into()))], message);
                    return None;
                }
                let disc = members(input).get(*key);
                match options.iter().find(|o| o.discriminator_accepts(key, disc)) {
                    Some(option) => option.run(input, cx, depth + 1),
                    None => {
                        cx.path.push(Seg::Key((*key).to_string()));
                        cx.issue(
                            vec![
                                ("code", J::Str("invalid_union".into())),
                                ("errors", J::Arr(Vec::new())),
                                ("note", J::Str("No matching discriminator".into())),
                                ("discriminator", J::Str((*key).into())),
                            ],
                            "Invalid input".into(),
                        );
                        cx.path.pop();
                        None
                    }
                }
            }
            Schema::Intersection(a, b) => {
                let left = a.run(input, cx, depth + 1);
                let right = b.run(input, cx, depth + 1);
                match (left, right) {
                    (Some(Value::Object(mut l)), Some(Value::Object(r))) => {
                        for (k, v) in r {
                            l.entry(k).or_insert(v);
                        }
                        Some(Value::Object(l))
                    }
                    (l, r) => l.or(r),
                }
            }
        }
    }
}
