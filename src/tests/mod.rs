//! Test support the cores' native tests share: the replay of the recorded 0.3 golden files
//! ([`golden`]), used by the stream and the index core's tests.

pub(crate) mod golden;
