"""The experiment directory: its file names (paths), its config as commands read and change it (config),
the lock one writer holds (lock), and the checkpoint file format (checkpoint_file)."""
