"""volthub: a self-hostable developer platform for live streaming."""
