//! [`ReadOnly`]: a store that serves reads and refuses writes, for the methods a core
//! declares as never writing. The shell runs those outside a transaction (a synchronous
//! call cannot interleave with another, so a transaction would only add its cost); should
//! such a method ever write, the write fails loudly instead of landing non-atomically.
//!
//! Knows no core: the caller declares which methods never write.

use super::{ListOptions, Store, StoreResult, Stored};
use crate::wire::RpcError;

pub struct ReadOnly<S>(pub S);

fn refused(key: &str) -> RpcError {
    RpcError::error(format!("internal: write of {key} in a read-only call"))
}

impl<S: Store> Store for ReadOnly<S> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        self.0.get_value(key)
    }
    fn put(&mut self, key: &str, _value: &str) -> StoreResult<()> {
        Err(refused(key))
    }
    fn put_bytes(&mut self, key: &str, _value: &[u8]) -> StoreResult<()> {
        Err(refused(key))
    }
    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        Err(refused(key))
    }
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.0.list_values(options)
    }
    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        self.0.list_visit(options, visit)
    }
    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        self.0.contains(key)
    }
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        self.0.last_key(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::hop::{Args, Ctx};
    use crate::store::alarm::Alarm;
    use crate::store::MemoryStore;
    use crate::wire::Value;

    #[test]
    fn reads_pass_writes_fail() {
        let mut mem = MemoryStore::new();
        mem.put("a", "1").unwrap();
        let mut ro = ReadOnly(&mut mem as &mut dyn Store);
        assert_eq!(ro.get("a").unwrap().as_deref(), Some("1"));
        assert_eq!(ro.list(&ListOptions::default()).unwrap().len(), 1);
        assert!(ro.put("b", "2").is_err());
        assert!(ro.delete("a").is_err());
        assert_eq!(mem.get("b").unwrap(), None);
    }

    /// Each core's declared read-only methods, called with typical arguments on a store
    /// with data, never write.
    #[test]
    fn declared_read_only_methods_do_not_write() {
        let config = crate::config::Config::default();
        let ctx = Ctx { now: 1_700_000_000_000, name: "wrun_ro", config: &config };
        let s = |t: &str| Value::str(t);
        // A run with an event, a stream with a chunk, an index key, a queued message.
        let mut run = MemoryStore::new();
        let created = Value::object([
            ("eventType", s("run_created")),
            ("eventData", Value::object([("deploymentId", s("d")), ("workflowName", s("wf")), ("input", Value::Array(vec![]))])),
        ]);
        let req = Value::object([("runId", s("wrun_ro")), ("data", created)]);
        crate::run::call(&mut run, &ctx, &mut Alarm::unknown(), "applyEvent", Args(&[req])).unwrap();
        for m in crate::run::READ_ONLY {
            let args = [s("x")];
            let _ = crate::run::call(&mut ReadOnly(&mut run as &mut dyn Store), &ctx, &mut Alarm::unknown(), m, Args(&args))
                .map_err(|e| assert!(!e.message.starts_with("internal: write"), "{m}: {e:?}"));
        }
        let mut stream = MemoryStore::new();
        crate::stream::call(&mut stream, &ctx, "writeChunk", Args(&[s("wrun_ro"), s("chunk")])).unwrap();
        for m in crate::stream::READ_ONLY {
            let args = [s("wrun_ro"), Value::num(0)];
            let _ = crate::stream::call(&mut ReadOnly(&mut stream as &mut dyn Store), &ctx, m, Args(&args))
                .map_err(|e| assert!(!e.message.starts_with("internal: write"), "{m}: {e:?}"));
        }
        let mut index = MemoryStore::new();
        crate::index::call(&mut index, &ctx, "put", Args(&[s("k"), s("v")])).unwrap();
        for m in crate::index::READ_ONLY {
            let args = [s("k")];
            let _ = crate::index::call(&mut ReadOnly(&mut index as &mut dyn Store), &ctx, m, Args(&args))
                .map_err(|e| assert!(!e.message.starts_with("internal: write"), "{m}: {e:?}"));
        }
        let mut queue = MemoryStore::new();
        for m in crate::queue::READ_ONLY {
            let _ = crate::queue::call(&mut ReadOnly(&mut queue as &mut dyn Store), &ctx, &mut Alarm::new(None), m, Args(&[]))
                .map_err(|e| assert!(!e.message.starts_with("internal: write"), "{m}: {e:?}"));
        }
    }
}
