module memtrailgotest

go 1.19
