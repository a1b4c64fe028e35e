//! Stage `selftest`: not written yet (see the open issues).
