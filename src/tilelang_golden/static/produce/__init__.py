"""Producing a case's files: lower the variant with TileLang, read the facts, normalize the source, cache them."""
