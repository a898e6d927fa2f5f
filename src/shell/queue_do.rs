//! `QueueDO` shell (placeholder until the queue core lands).

use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use super::serve::serve;

#[durable_object]
pub struct QueueDO {
    state: State,
    env: Env,
}

impl DurableObject for QueueDO {
    fn new(state: State, env: Env) -> Self {
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        serve(&self.state, &self.env, req, crate::queue::call).await
    }
}
