//! Stage `sources`: not written yet (see the open issues).
