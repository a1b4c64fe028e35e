//! Stage `expect`: not written yet (see the open issues).
