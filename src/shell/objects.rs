//! `StreamDO` and `IndexDO`: shells whose every method is synchronous core code run in
//! one transaction. (`WorkflowRunDO`, with its retention alarm and DO-to-DO calls, lives
//! in `run_do.rs`; `QueueDO`, which delivers over HTTP from its alarm, in `queue_do.rs`.)

use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use super::serve::serve;

#[durable_object]
pub struct StreamDO {
    state: State,
    env: Env,
}

impl DurableObject for StreamDO {
    fn new(state: State, env: Env) -> Self {
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        serve(&self.state, &self.env, req, crate::stream::call).await
    }
}

#[durable_object]
pub struct IndexDO {
    state: State,
    env: Env,
}

impl DurableObject for IndexDO {
    fn new(state: State, env: Env) -> Self {
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        serve(&self.state, &self.env, req, crate::index::call).await
    }
}
