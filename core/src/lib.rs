//! fairq-core (under construction).
#![no_std]
