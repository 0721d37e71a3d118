package y
