package part

import _ "example.com/fixture/comp/y"
