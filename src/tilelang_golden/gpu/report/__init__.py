"""What a GPU run tells people and machines: the records, the JSON and Markdown report, the sweep plots."""
