//! Native tests of the run core.
