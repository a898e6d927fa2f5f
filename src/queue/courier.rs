//! What a queue shard and its couriers say to each other ([`super::pace`] says why they
//! exist): the shard lends a courier claimed deliveries as [`Item`]s (the lease and the
//! request to make), and the courier reports each answer back as a [`Report`] in its next
//! `courierSync(index, reports, want, running)` call, which also asks for up to `want`
//! more. Private to the queue class: the router never routes these methods.
//!
//! Pure encoding over [`Value`]; a malformed entry decodes to `None` (the shard skips it:
//! its claim is recovered by its deadline).

use crate::wire::Value;

use super::delivery::{Body, OutboundRequest, Outcome};

/// The shard method a courier calls (reports and asks for more).
pub const SYNC_METHOD: &str = "courierSync";
/// The courier method the shard calls to wake it.
pub const WAKE_METHOD: &str = "courierWake";

/// Whether `method` is one of the couriers' (served by the shell, not the core).
pub fn is_courier_method(method: &str) -> bool {
    method == SYNC_METHOD || method == WAKE_METHOD
}

/// One delivery lent to a courier.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub lease: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

pub fn encode_item(lease: &str, request: &OutboundRequest) -> Value {
    let headers = request.headers.iter().map(|(k, v)| Value::Array(vec![Value::str(*k), Value::str(v.as_str())])).collect();
    let body = match &request.body {
        Body::None => Value::Null,
        Body::Text(t) => Value::str(t.as_str()),
        Body::Bytes(b) => Value::Bytes(b.clone()),
    };
    Value::object([
        ("lease", Value::str(lease)),
        ("url", Value::str(request.url.as_str())),
        ("headers", Value::Array(headers)),
        ("body", body),
    ])
}

pub fn decode_item(v: &Value) -> Option<Item> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let mut headers = Vec::new();
    for pair in v.get("headers")?.as_array()? {
        let pair = pair.as_array()?;
        headers.push((pair.first()?.as_str()?.to_string(), pair.get(1)?.as_str()?.to_string()));
    }
    let body = match v.get("body") {
        None | Some(Value::Null) => Body::None,
        Some(Value::String(s)) => Body::Text(s.clone()),
        Some(Value::Bytes(b)) => Body::Bytes(b.clone()),
        Some(_) => return None,
    };
    Some(Item { lease: text("lease")?, url: text("url")?, headers, body })
}

/// One delivery's answer as the courier reports it.
pub type Report = (String, Outcome);

pub fn encode_report(lease: &str, outcome: &Outcome) -> Value {
    let mut members = vec![("lease", Value::str(lease))];
    match outcome {
        Outcome::Response { status, body } => {
            members.push(("status", Value::num(*status)));
            if let Some(b) = body {
                members.push(("body", Value::Bytes(b.clone())));
            }
        }
        Outcome::Transport(error) => members.push(("error", Value::str(error.as_str()))),
        Outcome::Refused { retry_after } => {
            members.push(("status", Value::num(429)));
            if let Some(r) = retry_after {
                members.push(("retryAfter", Value::str(r.as_str())));
            }
        }
    }
    Value::object(members)
}

pub fn decode_report(v: &Value) -> Option<Report> {
    let lease = v.get("lease")?.as_str()?.to_string();
    if let Some(error) = v.get("error") {
        return Some((lease, Outcome::Transport(error.as_str()?.to_string())));
    }
    let status = v.get("status")?.as_f64()?;
    if !(100.0..=599.0).contains(&status) || status.fract() != 0.0 {
        return None;
    }
    let status = status as u16;
    if status == 429 {
        let retry_after = v.get("retryAfter").and_then(Value::as_str).map(str::to_string);
        return Some((lease, Outcome::Refused { retry_after }));
    }
    let body = match v.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::Bytes(b)) => Some(b.clone()),
        Some(_) => return None,
    };
    Some((lease, Outcome::Response { status, body }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_and_reports_round_trip_through_the_wire_codec() {
        let request = OutboundRequest {
            url: "http://app/.well-known/workflow/v1/flow".into(),
            headers: vec![("content-type", "application/json".into()), ("x-vqs-message-attempt", "2".into())],
            body: Body::Bytes(vec![0, 1, 255]),
        };
        let wire = Value::parse(&encode_item("inflight-deadline:1:m", &request).to_json().unwrap()).unwrap();
        let item = decode_item(&wire).unwrap();
        assert_eq!(item.lease, "inflight-deadline:1:m");
        assert_eq!(item.url, request.url);
        assert_eq!(
            item.headers,
            [("content-type".to_string(), "application/json".to_string()), ("x-vqs-message-attempt".into(), "2".into())]
        );
        assert_eq!(item.body, Body::Bytes(vec![0, 1, 255]));
        for body in [Body::None, Body::Text("{\"a\":1}".into())] {
            let r = OutboundRequest { body: body.clone(), ..request.clone() };
            assert_eq!(decode_item(&encode_item("l", &r)).unwrap().body, body);
        }
        for outcome in [
            Outcome::Response { status: 200, body: None },
            Outcome::Response { status: 503, body: Some(b"{\"timeoutSeconds\":1}".to_vec()) },
            Outcome::Transport("TimeoutError".into()),
            Outcome::Refused { retry_after: Some("3".into()) },
            Outcome::Refused { retry_after: None },
        ] {
            let wire = Value::parse(&encode_report("l", &outcome).to_json().unwrap()).unwrap();
            assert_eq!(decode_report(&wire), Some(("l".to_string(), outcome)));
        }
        assert_eq!(decode_report(&Value::object([("lease", Value::str("l")), ("status", Value::num(1e9))])), None);
        assert_eq!(decode_report(&Value::object([("status", Value::num(200))])), None);
        assert_eq!(decode_item(&Value::object([("lease", Value::str("l"))])), None);
        assert!(is_courier_method("courierSync") && is_courier_method("courierWake") && !is_courier_method("enqueue"));
    }
}
