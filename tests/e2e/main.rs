mod fake_llm;
mod fake_llm_selftest;
