"""System-level models that compose the verified blocks."""
