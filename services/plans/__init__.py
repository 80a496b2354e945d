"""Plan runs (the capsule plan format) through the one gateway, their reports, and replay."""
