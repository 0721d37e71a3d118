package z

import _ "example.com/fixture/comp/y"
