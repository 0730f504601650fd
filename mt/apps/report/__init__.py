"""Looking at an experiment: `mt info`, `mt plot`, attention maps (`mt attention`) and `mt report`'s page."""
