"""What a static run tells a reviewer: the verdict in words, the job summary and annotations."""
