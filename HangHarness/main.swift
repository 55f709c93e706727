print("hang-harness: not built yet")
