//! Stage `resolve`: not written yet (see the open issues).
