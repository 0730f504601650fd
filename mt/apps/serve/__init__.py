"""`mt serve`: the HTTP routes, reading requests, and the one queue whose worker batches them."""
