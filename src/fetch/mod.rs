//! Stage `fetch`: not written yet (see the open issues).
