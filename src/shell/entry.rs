//! The Worker's `fetch` entry: the router's I/O around the decisions in
//! [`crate::wire::router`] — read the path, headers and (size-limited, streamed) body,
//! forward the call to the named DO instance over the private hop, answer.

use futures_util::StreamExt;
use worker::{event, Context, Env, Request, Response, Result};

use super::call::hop_request;
use super::env::{namespace, var};
use super::serve::json;
use crate::wire::error::MAX_BODY_BYTES;
use crate::wire::router::{self, check_body, content_length_too_large, decode_name, Route, HEALTH_BODY};
use crate::wire::RouterError;

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    match handle(req, &env).await {
        Ok(resp) => Ok(resp),
        Err(e) => json(e.status(), e.body()),
    }
}

fn internal(e: impl std::fmt::Display) -> RouterError {
    RouterError::Internal(e.to_string())
}

/// Read the body as a stream, refusing it as soon as it exceeds the limit.
async fn read_limited(req: &mut Request) -> std::result::Result<Vec<u8>, RouterError> {
    if req.inner().body().is_none() {
        return Ok(Vec::new());
    }
    let mut stream = req.stream().map_err(internal)?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(internal)?;
        if (body.len() + chunk.len()) as u64 > MAX_BODY_BYTES {
            return Err(RouterError::PayloadTooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn handle(mut req: Request, env: &Env) -> std::result::Result<Response, RouterError> {
    let url = req.url().map_err(internal)?;
    let pathname = url.path().to_string();
    let authorization = req.headers().get("authorization").ok().flatten();
    let secret = var(env, "WORLD_SECRET");
    let route = router::route(req.method().as_ref(), &pathname, authorization.as_deref(), secret.as_deref())?;
    let (binding, encoded_name, method) = match route {
        Route::Health => return json(200, HEALTH_BODY.to_string()).map_err(internal),
        Route::Rpc { binding, encoded_name, method } => (binding, encoded_name, method),
    };
    let content_length = req.headers().get("content-length").ok().flatten();
    if content_length_too_large(content_length.as_deref()) {
        return Err(RouterError::PayloadTooLarge);
    }
    let bytes = read_limited(&mut req).await?;
    let text = check_body(&bytes)?;
    drop(bytes);
    let name = decode_name(&encoded_name)?;
    let ns = namespace(env, binding.env_name()).ok_or(RouterError::MissingBinding(binding.env_name()))?;
    let stub = ns.id_from_name(&name).and_then(|id| id.get_stub()).map_err(internal)?;

    let hop = hop_request(&name, &method, text).map_err(internal)?;
    let mut resp = stub.fetch_with_request(hop).await.map_err(internal)?;
    let status = resp.status_code();
    let body = resp.text().await.map_err(internal)?;
    json(status, body).map_err(internal)
}
