//! The public HTTP protocol: the tagged-JSON codec, JavaScript date and URI rules, the
//! router's decisions and the error table. No I/O here.
//!
//! Imports nothing of ours: no store, protocol, core or shell.

pub mod base64;
pub mod canonical;
pub mod check;
pub mod date;
pub mod error;
pub mod js;
pub mod json_parse;
pub mod number;
pub mod router;
mod serde_impl;
pub mod uri;
pub mod value;

pub use error::{RouterError, RpcError};
pub use value::{Map, Value};
