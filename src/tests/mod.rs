//! Unit tests that span modules: what no single module's tests can show.

/// Every kind of event, a secret planted in each of its strings, reaches no consumer unmasked.
mod masked_events;
