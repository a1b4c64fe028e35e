//! Stage `catalog`: not written yet (see the open issues).
