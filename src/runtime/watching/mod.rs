//! Watching the API server: one list/watch per resource type ([`listwatch`]) feeding the
//! shared informers and their stores ([`informer`]), each type kept in one shape
//! ([`stored`]); secondary indexes over those stores ([`index`]); object counts from
//! metadata-only watches ([`counter`]).
//!
//! Reads only: writes, and the cache of what this process has just written, are in
//! [`super::writing`].

pub mod counter;
pub mod index;
pub mod informer;
pub mod listwatch;
pub mod stored;
