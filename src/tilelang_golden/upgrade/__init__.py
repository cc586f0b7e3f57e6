"""What another TileLang would change: the static preview, and the speed of both TileLangs on a GPU."""
