"""What the front ends share beside the engine: the config, the services they assemble, the alias
rule, and the words for runs and controls."""
