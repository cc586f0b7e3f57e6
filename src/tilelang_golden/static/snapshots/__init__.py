"""What a snapshot is: the files under golden/, their kinds, how two versions differ, and each check's result."""
