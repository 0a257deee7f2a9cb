//! Mock payments server.
