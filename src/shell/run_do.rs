//! `WorkflowRunDO`: every RPC but `cleanupNow` is one transaction of the run core; the
//! retention cleanup (its alarm, and `cleanupNow`, which runs the loop before answering)
//! alternates transactions with calls to the other Durable Objects
//! ([`crate::run::cleanup::driver`]).

use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use super::alarm::apply_alarm;
use super::call::call_do;
use super::env::config;
use super::kv::in_transaction;
use super::serve::{decode, json, now_ms};
use crate::hop::{answer, Args, Ctx};
use crate::run::cleanup::driver::{self, CleanupHost};
use crate::run::cleanup::CleanupArgs;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

#[durable_object]
pub struct WorkflowRunDO {
    state: State,
    env: Env,
}

/// The cleanup loop's view of this object: its storage and the other namespaces.
struct Host<'a> {
    state: &'a State,
    env: &'a Env,
}

impl CleanupHost for Host<'_> {
    async fn transact<T>(
        &self,
        f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> std::result::Result<T, RpcError>,
    ) -> std::result::Result<T, RpcError> {
        let storage = self.state.storage();
        let mut alarm = Alarm::unknown();
        let now = now_ms();
        let out = in_transaction(&storage, |s| f(s, now, &mut alarm))?;
        apply_alarm(&storage, alarm.change()).await?;
        Ok(out)
    }

    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> std::result::Result<Value, RpcError> {
        call_do(self.env, binding, name, method, args).await
    }
}

impl WorkflowRunDO {
    fn host(&self) -> Host<'_> {
        Host { state: &self.state, env: &self.env }
    }
}

impl DurableObject for WorkflowRunDO {
    fn new(state: State, env: Env) -> Self {
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let call = match decode(req).await {
            Ok(c) => c,
            Err(e) => return json(500, e.body()),
        };
        let result = if call.method == "cleanupNow" {
            match CleanupArgs::parse(Args(&call.args)) {
                Ok(args) => driver::cleanup_now(&self.host(), args).await,
                Err(e) => Err(e),
            }
        } else {
            let cfg = config(&self.env);
            let ctx = Ctx { now: now_ms(), name: &call.name, config: &cfg };
            let storage = self.state.storage();
            let mut alarm = Alarm::unknown();
            let out = in_transaction(&storage, |s| crate::run::call(s, &ctx, &mut alarm, &call.method, Args(&call.args)));
            match out {
                Ok(v) => {
                    // The call has committed: answer it even if the alarm cannot be set. The
                    // run is fenced by time regardless, and `rearmCleanup` re-arms.
                    if let Err(e) = apply_alarm(&storage, alarm.change()).await {
                        worker::console_error!("WorkflowRunDO {}: committed, but {}", call.method, e.message);
                    }
                    Ok(v)
                }
                Err(e) => Err(e),
            }
        };
        let (status, body) = answer(result);
        json(status, body)
    }

    async fn alarm(&self) -> Result<Response> {
        // Never throws: a failed phase is recorded with a backoff alarm by the driver.
        if let Err(e) = driver::run_and_record(&self.host()).await {
            worker::console_error!("WorkflowRunDO cleanup: {}: {}", e.name, e.message);
        }
        Response::ok("")
    }
}
