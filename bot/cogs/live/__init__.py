"""One message per run in the staff channel, edited as the run moves."""
