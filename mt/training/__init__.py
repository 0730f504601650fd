"""Training (`mt train`): setup, the loop, one update, the loss, schedule, optimizer, EMA, validation,
checkpoints and resuming, several processes, and averaging."""
