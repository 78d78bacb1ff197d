package main

func (b *bench) measureMemory(server string) {}
